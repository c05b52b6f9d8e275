"""Print the JWT test vectors of tests/unit/test_jwt.c and test_grant.c as C.

Run by hand with PyJWT installed (python3 tests/unit/jwt_vectors.py >
tests/unit/jwt_vectors.h); the output is committed, so the unit tests need
no Python. Tokens PyJWT cannot make (duplicate members, a forged alg) are
signed here with the standard library's hmac, exactly as RFC 7515 §5.1 says.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import tempfile
import warnings

import jwt

warnings.simplefilter("ignore")     # PyJWT warns that 36 bytes is short for HS384/HS512: those are refused anyway

NOW = 1700000000                    # the tests' clock
K1 = "k1-secret-0123456789abcdefghijklmnop"
K2 = "k2-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA98"
K3 = "k3-sécret-ünïcode-0123456789abcdefgh"    # the key is its UTF-8 bytes


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def raw_token(header_json, payload_json, key):
    """Sign exactly these header and payload texts (HS256)."""
    signing = b64(header_json.encode()) + "." + b64(payload_json.encode())
    sig = hmac.new(key.encode(), signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64(sig)


def pyjwt(payload, key, kid="k1", alg="HS256", **kw):
    headers = {"kid": kid} if kid else None
    return jwt.encode(payload, key, algorithm=alg, headers=headers, **kw)


GOOD = {"channels": ["news", "chat"], "exp": NOW + 3600, "sub": "alice", "iat": NOW - 10}
vectors = [
    ("valid_k1", pyjwt(GOOD, K1)),
    ("valid_k2", pyjwt(dict(GOOD, sub="bob"), K2, kid="k2")),
    ("valid_k3_utf8_key", pyjwt(GOOD, K3, kid="k3")),
    ("valid_nokid", pyjwt(GOOD, K1, kid=None)),
    ("valid_nbf_iat", pyjwt(dict(GOOD, nbf=NOW - 5, iat=NOW - 5, iss="issuer-x"), K1)),
    ("valid_frac_exp", pyjwt(dict(GOOD, exp=NOW + 0.5), K1)),
    ("alg_none", jwt.encode(GOOD, None, algorithm="none", headers={"kid": "k1"})),
    ("alg_hs384", pyjwt(GOOD, K1, alg="HS384")),
    ("alg_hs512", pyjwt(GOOD, K1, alg="HS512")),
    ("alg_rs256_forged", raw_token('{"alg":"RS256","kid":"k1"}', json.dumps(GOOD), K1)),
    ("alg_lower", raw_token('{"alg":"hs256","kid":"k1"}', json.dumps(GOOD), K1)),
    ("no_alg", raw_token('{"kid":"k1"}', json.dumps(GOOD), K1)),
    ("crit", raw_token('{"alg":"HS256","kid":"k1","crit":["b64"],"b64":false}', json.dumps(GOOD), K1)),
    ("kid_number", raw_token('{"alg":"HS256","kid":1}', json.dumps(GOOD), K1)),
    ("dup_header", raw_token('{"alg":"HS256","alg":"HS256","kid":"k1"}', json.dumps(GOOD), K1)),
    ("other_kids_key", pyjwt(GOOD, K2, kid="k1")),
    ("unknown_kid", pyjwt(GOOD, K1, kid="k9")),
    ("expired", pyjwt(dict(GOOD, exp=NOW - 31), K1)),
    ("expired_in_leeway", pyjwt(dict(GOOD, exp=NOW - 29), K1)),
    ("nbf_future", pyjwt(dict(GOOD, nbf=NOW + 31), K1)),
    ("nbf_in_leeway", pyjwt(dict(GOOD, nbf=NOW + 29), K1)),
    ("iat_future", pyjwt(dict(GOOD, iat=NOW + 31), K1)),
    ("no_exp", pyjwt({"channels": ["news"]}, K1)),
    ("exp_string", pyjwt(dict(GOOD, exp=str(NOW + 3600)), K1)),
    ("exp_bool", raw_token('{"alg":"HS256","kid":"k1"}', '{"channels":["news"],"exp":true}', K1)),
    ("sub_number", pyjwt(dict(GOOD, sub=7), K1)),
    ("dup_claims", raw_token('{"alg":"HS256","kid":"k1"}',
                             '{"channels":["news"],"exp":%d,"exp":%d}' % (NOW + 3600, NOW + 3600), K1)),
    ("claims_array", raw_token('{"alg":"HS256","kid":"k1"}', '[1,2]', K1)),
    ("claims_not_json", raw_token('{"alg":"HS256","kid":"k1"}', '{"exp":', K1)),
    ("channels_string", pyjwt(dict(GOOD, channels="news"), K1)),
    ("channels_number_item", pyjwt(dict(GOOD, channels=["news", 1]), K1)),
    ("channels_missing", pyjwt({"exp": NOW + 3600}, K1)),
    ("channels_empty", pyjwt(dict(GOOD, channels=[]), K1)),
    ("channel_reserved", pyjwt(dict(GOOD, channels=["news", "m0.internal"]), K1)),
    ("channel_control", pyjwt(dict(GOOD, channels=["bad\nname"]), K1)),
    ("channel_non_ascii", pyjwt(dict(GOOD, channels=["caf\u00e9"]), K1)),
    ("channel_too_long", pyjwt(dict(GOOD, channels=["x" * 201]), K1)),
    ("channels_repeat", pyjwt(dict(GOOD, channels=["a", "b", "a"]), K1)),
    ("channels_33", pyjwt(dict(GOOD, channels=["c%d" % i for i in range(33)]), K1)),
]

# What m0_jwt_sign_hs256("k1", SIGNED_PAYLOAD, K1) must write, byte for
# byte (its header is compact, in this order), and PyJWT must accept it.
SIGNED_PAYLOAD = '{"channels":["news"],"exp":%d,"sub":"carol"}' % (NOW + 60)
c_signed = raw_token('{"alg":"HS256","typ":"JWT","kid":"k1"}', SIGNED_PAYLOAD, K1)
assert jwt.decode(c_signed, K1, algorithms=["HS256"], options={"verify_exp": False})["sub"] == "carol"
assert jwt.get_unverified_header(c_signed)["kid"] == "k1"
vectors.append(("c_signer_k1", c_signed))

# m0pub.grant's own token (the newest key of a k1, k2 file: k2), which the C
# verifier must accept.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import m0pub  # noqa: E402

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "keys")
    with open(path, "w") as f:
        f.write("k1 %s\nk2 %s\n" % (K1, K2))
    os.chmod(path, 0o600)
    minted = m0pub.grant(["news", "chat"], ttl=600, sub="dave", key_file=path, now=NOW)
    assert jwt.decode(minted, K2, algorithms=["HS256"], options={"verify_exp": False})["sub"] == "dave"
vectors.append(("m0pub_k2", minted))

print("/* Generated by tests/unit/jwt_vectors.py (PyJWT %s); do not edit. */" % jwt.__version__)
print("#define V_NOW %dLL" % NOW)
for name, key in (("K1", K1), ("K2", K2), ("K3", K3)):
    c = "".join("\\%03o" % b if b >= 0x80 else chr(b) for b in key.encode())   # octal: 3 digits at most
    print('#define V_%s "%s"' % (name, c))
print("#define V_SIGNED_PAYLOAD %s" % json.dumps(SIGNED_PAYLOAD))
print("static const struct vector { const char *name, *token; } vectors[] = {")
for name, tok in vectors:
    print('    {"%s",\n     "%s"},' % (name, tok))
print("};")
