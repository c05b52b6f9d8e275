/*
 * control.h — the conversation between the master (master.c) and a worker
 * (serve.c answers and reports for it).
 *
 * The master and a worker talk over a control socket (SOCK_SEQPACKET; one
 * byte per message but for the pong), so a reload never has two workers of
 * one listener slot reading its bus at once, and a broken reload never
 * stops the old workers:
 *   worker → master  'B'  booted: the application imported and the worker
 *                         set up (m0_serve_prepare), ready to serve;
 *                    'R'  retired: no longer accepting nor reading the bus;
 *                    'Q'  replace me: --max-requests reached (the master
 *                         boots a successor for the slot, then drains it);
 *                    'H'  reload: --reload saw an application file change
 *                         (the master replaces every worker, as on SIGHUP);
 *                    'A'  + uint32 (host order) open connections: the
 *                         loop's answer to a ping (one 5-byte message);
 *   master → worker  'G'  go: accept and read the bus;
 *                    'D'  drain (as SIGTERM);
 *                    'P'  ping: answer 'A' (the watchdog and STATUS=);
 *                    'K'  + uint8 index: sign grants with that key of the
 *                         worker's --grant-key-file set from now on (one
 *                         2-byte message; master_keys.c says when).
 *
 * With --threads N the worker's first loop speaks for the process: it
 * alone has the master's socket and the signals, and talks to each other
 * loop over a SOCK_SEQPACKET pair of their own, with the same letters, one
 * byte each: 'G', 'D', 'P' and 'S' (stop now: SIGQUIT) to a loop; 'R',
 * 'Q', 'A' (no count: the first loop sums every loop's connections) and
 * 'X' (the loop stopped) back. The first loop tells the master 'R' when
 * every loop has retired, and 'A' when every loop has answered its ping.
 * 'K' is not relayed: the signing key is the process's, one atomic that
 * every loop's views read.
 */
#ifndef M0_CONTROL_H
#define M0_CONTROL_H

#define M0_CTL_BOOTED  'B'
#define M0_CTL_RETIRED 'R'
#define M0_CTL_GO      'G'
#define M0_CTL_DRAIN   'D'
#define M0_CTL_REPLACE 'Q'
#define M0_CTL_RELOAD  'H'
#define M0_CTL_PING    'P'
#define M0_CTL_SIGN    'K'
#define M0_CTL_PONG    'A'
#define M0_CTL_STOP    'S'     /* between loops: stop now (SIGQUIT) */
#define M0_CTL_EXITED  'X'     /* between loops: the loop has stopped */

#endif
