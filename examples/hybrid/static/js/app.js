// Served from examples/hybrid/static (app.js.gz to clients that accept gzip).
// Listens to the "hybrid" channel held by the server; /publish/?data=... posts to it.
(function () {
  var out = document.getElementById("events");
  if (!window.EventSource || !out) return;
  var es = new EventSource("/events/");
  es.onopen = function () { out.textContent = "connected"; };
  es.onmessage = function (e) { out.textContent = JSON.parse(e.data).data; };
})();
