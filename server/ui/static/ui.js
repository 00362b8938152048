// drover's web UI: the little the pages need a script for. Every page
// reads without it; this adds the one-click login, live pages
// (server-sent events), local times and ticking relative times. Served
// from /ui/static/ under a Content-Security-Policy that runs no inline
// script.
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

  function pad(n) {
    return (n < 10 ? "0" : "") + n;
  }

  // Times: the page writes UTC; show the browser's local time, UTC on
  // hover (the title the server wrote).
  function localTimes(root) {
    var els = root.querySelectorAll("time[data-local]");
    for (var i = 0; i < els.length; i++) {
      var d = new Date(els[i].getAttribute("datetime"));
      if (isNaN(d.getTime())) {
        continue;
      }
      var off = -d.getTimezoneOffset();
      var zone = "UTC" + (off >= 0 ? "+" : "-") + pad(Math.floor(Math.abs(off) / 60)) + ":" + pad(Math.abs(off) % 60);
      els[i].textContent = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
        pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()) + " " + (off === 0 ? "UTC" : zone);
    }
  }

  // age says a duration as the server's ago does: 42s, 17m, 3h 5m, 4 days.
  function age(ms) {
    var s = Math.max(Math.floor(ms / 1000), 0);
    if (s < 60) {
      return s + "s";
    }
    if (s < 3600) {
      return Math.floor(s / 60) + "m";
    }
    if (s < 48 * 3600) {
      return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    }
    return Math.floor(s / 86400) + " days";
  }

  function tickAgo() {
    var els = document.querySelectorAll("time[data-ago]");
    var now = Date.now();
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute("datetime"));
      if (!isNaN(t)) {
        els[i].textContent = age(now - t) + " ago";
      }
    }
  }

  // sayer returns a function that puts text in the element with the id
  // (a status line that screen readers announce), if the page has it.
  function sayer(id) {
    var el = document.getElementById(id);
    return function (text) {
      if (el) {
        el.textContent = text;
      }
    };
  }

  // focusable lists what the keyboard reaches inside el, in order.
  function focusable(el) {
    return Array.prototype.slice.call(el.querySelectorAll(
      'a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex="-1"])'));
  }

  // A live page: the server renders every region of the page from one
  // read and sends them together; they are swapped in together, so no
  // two parts of the page show different moments. EventSource resumes
  // from the last event's id (the change stream's index) on its own.
  function livePage(main) {
    var say = sayer("live-status");
    var es = new EventSource(main.getAttribute("data-live-page"));
    var shown = {}; // each region's last HTML: an unchanged one is left alone
    es.addEventListener("page", function (e) {
      var ev = JSON.parse(e.data);
      var names = Object.keys(ev.regions);
      for (var i = 0; i < names.length; i++) {
        var el = main.querySelector('[data-region="' + names[i] + '"]');
        if (!el || shown[names[i]] === ev.regions[names[i]]) {
          continue;
        }
        // Whoever is reading with the keyboard keeps their place: the
        // control that had the focus is the same one of the new region.
        var at = -1;
        if (el.contains(document.activeElement)) {
          at = focusable(el).indexOf(document.activeElement);
        }
        el.innerHTML = ev.regions[names[i]];
        shown[names[i]] = ev.regions[names[i]];
        localTimes(el);
        if (at >= 0) {
          var now = focusable(el);
          if (now.length > 0) {
            now[Math.min(at, now.length - 1)].focus({preventScroll: true});
          }
        }
      }
      tickAgo();
      main.setAttribute("data-index", e.lastEventId);
      if (ev.done) {
        say("This page no longer changes.");
        es.close();
      }
    });
    es.addEventListener("failed", function (e) {
      say("Live updates stopped: " + e.data + " Reload the page to try again.");
      es.close();
    });
    // A stream the server refuses (the session ended) is not retried.
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) {
        say("Live updates stopped (the session may have ended): reload the page.");
      }
    });
  }

  // A job's log: new text is appended as text, never as HTML.
  // EventSource sends the last event's id (attempt:offset) when it
  // reconnects, so nothing is appended twice.
  function liveLog(el) {
    var say = sayer("log-status");
    var es = new EventSource(el.getAttribute("data-live"));
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
    es.addEventListener("error", function () {
      if (es.readyState === EventSource.CLOSED) {
        say("Live updates stopped (the session may have ended): reload the page.");
      }
    });
  }

  // A login link opened on the login page itself changes only the hash.
  window.addEventListener("hashchange", login);
  document.addEventListener("DOMContentLoaded", function () {
    login();
    localTimes(document);
    tickAgo();
    setInterval(tickAgo, 1000);
    var log = document.getElementById("log");
    if (log) {
      // A log opens at its end, where a running job writes.
      log.scrollTop = log.scrollHeight;
      if (log.hasAttribute("data-live")) {
        liveLog(log);
      }
    }
    var main = document.querySelector("main[data-live-page]");
    if (main) {
      livePage(main);
    }
  });
})();
