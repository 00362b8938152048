// drover's web UI: the little the pages need a script for. Every page
// reads without it; this adds the one-click login and live updates
// (server-sent events). Served from /ui/static/ under a
// Content-Security-Policy that runs no inline script.
"use strict";

(function () {
  // The login link carries the token in its fragment (#token=...), which
  // browsers never send to a server or put in a log: post it with the
  // form, and drop it from the address bar and history first.
  function login() {
    var form = document.getElementById("login");
    if (!form || location.hash.indexOf("#token=") !== 0) {
      return;
    }
    var token = decodeURIComponent(location.hash.slice("#token=".length));
    history.replaceState(null, "", location.pathname + location.search);
    document.getElementById("token").value = token;
    form.submit();
  }

  // The batch page's summary: the server sends it rendered (escaped by
  // its templates) each time it changes.
  function liveSummary(el) {
    var es = new EventSource(el.getAttribute("data-live"));
    es.addEventListener("summary", function (e) {
      el.innerHTML = e.data;
    });
    es.addEventListener("complete", function () {
      es.close();
    });
    es.addEventListener("failed", function () {
      es.close();
    });
  }

  // A running job's log: new text is appended as text, never as HTML.
  function liveLog(el) {
    var status = document.getElementById("log-status");
    var es = new EventSource(el.getAttribute("data-live"));
    function say(text) {
      if (status) {
        status.textContent = text;
      }
    }
    es.addEventListener("append", function (e) {
      var atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 4;
      el.textContent += JSON.parse(e.data);
      if (atEnd) {
        el.scrollTop = el.scrollHeight;
      }
    });
    es.addEventListener("attempt", function (e) {
      el.textContent = "";
      say("Following attempt " + e.data + ".");
    });
    es.addEventListener("end", function (e) {
      say("The job ended: " + e.data + ".");
      es.close();
    });
    es.addEventListener("failed", function (e) {
      say("Live updates stopped: " + e.data);
      es.close();
    });
  }

  // A login link opened on the login page itself changes only the hash.
  window.addEventListener("hashchange", login);
  document.addEventListener("DOMContentLoaded", function () {
    login();
    var live = document.querySelectorAll("[data-live]");
    for (var i = 0; i < live.length; i++) {
      if (live[i].id === "log") {
        liveLog(live[i]);
      } else {
        liveSummary(live[i]);
      }
    }
  });
})();
