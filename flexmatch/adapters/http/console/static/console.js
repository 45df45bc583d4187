// FlexMatch console: drag and drop imports, live job progress, prompt previews, copy.
// Plain JavaScript, no dependencies. Text from the server is always set with
// textContent, never as HTML.
"use strict";

(function () {
  var POLL_MS = 500;
  var POLL_LIMIT_MS = 30 * 60 * 1000;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, attrs[name]); });
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function money(value) {
    if (value === null || value === undefined) return "–";
    if (value === 0) return "$0";
    if (value < 0.01) return "$" + value.toFixed(6).replace(/0+$/, "");
    if (value < 1) return "$" + value.toFixed(4);
    return "$" + value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }

  function num(value) { return Number(value || 0).toLocaleString("en-US"); }

  function plural(count, word, many) {
    return num(count) + " " + (count === 1 ? word : (many || word + "s"));
  }

  function size(bytes) {
    if (bytes >= 1e9) return (bytes / 1e9).toFixed(1) + " GB";
    if (bytes >= 1e6) return (bytes / 1e6).toFixed(1) + " MB";
    if (bytes >= 1e3) return (bytes / 1e3).toFixed(1) + " kB";
    return bytes + " B";
  }

  function badge(kind) { return el("span", { "class": "badge " + kind }, kind); }

  function errorMessage(body, fallback) {
    return (body && body.error && body.error.message) || fallback;
  }

  function csrfOf(form) {
    var field = form.querySelector('input[name="csrf"]');
    return field ? field.value : "";
  }

  function documentLink(outcome) {
    if (!outcome.document_id || outcome.outcome === "failed") return null;
    // the id in the query string: any id, "a/../b" too, leads to its own document
    return "/console/document?id=" + encodeURIComponent(outcome.document_id);
  }

  function detailOf(outcome) {
    if (outcome.error) return outcome.error;
    if (outcome.outcome === "added" || outcome.outcome === "changed") {
      return plural(outcome.chunks, "chunk") + ", " + plural(outcome.matching_texts, "matching text");
    }
    if (outcome.outcome === "unchanged") return "already stored";
    return "";
  }

  function countsText(c) {
    return c.added + " added, " + c.changed + " changed, " + c.unchanged + " unchanged, " +
      plural(c.duplicates, "duplicate") + ", " + c.failed + " failed";
  }

  function costText(u) {
    return plural(u.calls, "call") + " (" + num(u.cached_calls) + " from the cache), " +
      num(u.prompt_tokens) + " + " + num(u.completion_tokens) + " tokens, " + money(u.cost_usd);
  }

  // -- polling a job --------------------------------------------------------------------
  function pollJob(url, onUpdate, onError) {
    var started = Date.now();
    function tick() {
      fetch(url, { headers: { "Accept": "application/json" }, credentials: "same-origin", cache: "no-store" })
        .then(function (response) {
          if (response.status === 429) {
            var wait = Number(response.headers.get("Retry-After") || 1) * 1000;
            setTimeout(tick, wait);
            return null;
          }
          return response.json().then(function (body) {
            if (!response.ok) throw new Error(errorMessage(body, "could not read the job (" + response.status + ")"));
            return body;
          });
        })
        .then(function (job) {
          if (!job) return;
          onUpdate(job);
          if (job.status === "done" || job.status === "failed") return;
          if (Date.now() - started > POLL_LIMIT_MS) throw new Error("stopped following the job; reload to see it");
          setTimeout(tick, POLL_MS);
        })
        .catch(function (error) { onError(error.message || String(error)); });
    }
    tick();
  }

  // -- the job page -----------------------------------------------------------------------
  function initJobPage(section) {
    function field(name) { return section.querySelector('[data-field="' + name + '"]'); }
    function update(job) {
      var status = field("status");
      status.className = "badge " + job.status;
      status.textContent = job.status;
      var bar = field("progress");
      bar.max = Math.max(job.total, 1);
      bar.value = job.processed;
      bar.textContent = job.processed + "/" + job.total;
      field("count").textContent = job.processed + " of " + job.total + " done";
      field("counts").textContent = countsText(job.counts);
      field("stored").textContent = plural(job.counts.chunks, "chunk") + ", " + plural(job.counts.matching_texts, "matching text");
      field("cost").textContent = costText(job.usage);
      var error = field("error");
      error.hidden = !job.error;
      error.textContent = job.error || "";
      var body = field("documents");
      body.textContent = "";
      job.documents.forEach(function (d) {
        var row = el("tr", { "data-outcome": d.outcome });
        var input = el("td", { "class": "uri" });
        var href = documentLink(d);
        if (href) input.appendChild(el("a", { href: href }, d.input)); else input.textContent = d.input;
        row.appendChild(input);
        var outcome = el("td");
        outcome.appendChild(badge(d.outcome));
        row.appendChild(outcome);
        row.appendChild(el("td", {}, detailOf(d)));
        body.appendChild(row);
      });
      var empty = field("empty");
      empty.hidden = job.documents.length > 0;
      if (job.status === "done" || job.status === "failed") {
        empty.textContent = "Nothing to report: no document needed it.";
        field("live").textContent = "Job " + job.status + ": " + countsText(job.counts) + ".";
      }
    }
    pollJob(section.getAttribute("data-job-poll"), update, function (message) {
      var error = field("error");
      error.hidden = false;
      error.textContent = message;
    });
  }

  // -- drag and drop import ---------------------------------------------------------------
  function initUpload(form) {
    var input = form.querySelector('input[type="file"]');
    var drop = form.querySelector("[data-drop]");
    var table = document.getElementById("upload-list");
    var body = table.querySelector("tbody");
    var status = document.getElementById("upload-status");
    var button = document.getElementById("upload-button");
    var clear = document.getElementById("upload-clear");
    var jobLink = document.getElementById("upload-job");
    var maxBytes = Number(form.getAttribute("data-max-bytes"));
    var maxBody = Number(form.getAttribute("data-max-body"));
    var files = [];
    var rows = [];
    var busy = false;

    input.required = false; // the script keeps its own list; it says when it is empty

    function cell(row, index) { return row.children[index]; }

    function setOutcome(row, kind, detail, href) {
      var c = cell(row, 3);
      c.textContent = "";
      c.appendChild(badge(kind));
      if (detail) {
        var text = el("span", { "class": kind === "failed" ? "error small" : "muted small" });
        text.textContent = " " + detail;
        c.appendChild(text);
      }
      if (href) {
        c.appendChild(document.createTextNode(" "));
        c.appendChild(el("a", { href: href }, "open"));
      }
      row.setAttribute("data-outcome", kind);
    }

    function setProgress(row, fraction) {
      var bar = cell(row, 2).querySelector("progress");
      var value = Math.max(0, Math.min(100, Math.round(fraction * 100)));
      bar.value = value;
      bar.textContent = value + "%";
    }

    function add(list) {
      if (busy) return;
      Array.prototype.forEach.call(list, function (file) {
        files.push(file);
        var row = el("tr", { "data-file": file.name });
        row.appendChild(el("td", { "class": "uri" }, file.name));
        row.appendChild(el("td", { "class": "num opt" }, size(file.size)));
        var progress = el("td");
        progress.appendChild(el("progress", { max: "100", value: "0", "aria-label": "Upload of " + file.name }, "0%"));
        row.appendChild(progress);
        row.appendChild(el("td"));
        setOutcome(row, "ready", file.size > maxBytes ? "over the " + size(maxBytes) + " cap: it will fail" : "");
        body.appendChild(row);
        rows.push(row);
      });
      table.hidden = files.length === 0;
      clear.hidden = files.length === 0;
      status.textContent = files.length + " file" + (files.length === 1 ? "" : "s") + " ready to import.";
    }

    input.addEventListener("change", function () {
      add(input.files);
      input.value = "";
    });
    ["dragenter", "dragover"].forEach(function (name) {
      drop.addEventListener(name, function (event) {
        event.preventDefault();
        drop.classList.add("over");
      });
    });
    ["dragleave", "dragend"].forEach(function (name) {
      drop.addEventListener(name, function () { drop.classList.remove("over"); });
    });
    drop.addEventListener("drop", function (event) {
      event.preventDefault();
      drop.classList.remove("over");
      if (event.dataTransfer && event.dataTransfer.files) add(event.dataTransfer.files);
    });
    clear.addEventListener("click", function () {
      if (busy) return;
      files = [];
      rows = [];
      body.textContent = "";
      table.hidden = true;
      clear.hidden = true;
      jobLink.hidden = true;
      status.textContent = "";
    });

    function followJob(accepted) {
      var labels = accepted.inputs || [];
      jobLink.href = accepted.url;
      jobLink.hidden = false;
      pollJob(accepted.poll, function (job) {
        rows.forEach(function (row, index) {
          var mine = job.documents.filter(function (d) { return d.input === labels[index]; });
          if (mine.length) {
            var first = mine[0];
            var detail = mine.length > 1 ? mine.length + " documents" : detailOf(first);
            setOutcome(row, first.outcome, detail, documentLink(first));
          } else if (job.status === "done" || job.status === "failed" || index < job.processed) {
            setOutcome(row, job.status === "failed" ? "failed" : "done", job.error || "see the job");
          } else {
            setOutcome(row, index === job.processed && job.status === "running" ? "running" : "queued", "");
          }
        });
        if (job.status === "done" || job.status === "failed") {
          busy = false;
          button.disabled = false;
          status.textContent = "Import " + job.status + ": " + countsText(job.counts) + ".";
          files = [];
        } else {
          status.textContent = "Importing: " + job.processed + " of " + job.total + " files done.";
        }
      }, function (message) {
        busy = false;
        button.disabled = false;
        status.textContent = message;
      });
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (busy) return;
      if (!files.length) {
        status.textContent = "Choose or drop at least one file first.";
        input.focus();
        return;
      }
      var total = files.reduce(function (sum, f) { return sum + f.size; }, 0);
      if (total > maxBody) {
        status.textContent = "These files are " + size(total) + " together, over the server's " + size(maxBody) + " limit per import; import them in smaller groups.";
        return;
      }
      var data = new FormData();
      data.append("csrf", csrfOf(form));
      data.append("source", form.querySelector('[name="source"]').value);
      files.forEach(function (file) { data.append("files", file, file.name); });
      var offsets = [];
      var running = 0;
      files.forEach(function (file) { offsets.push(running); running += file.size; });
      rows.forEach(function (row) { setOutcome(row, "uploading", ""); });
      busy = true;
      button.disabled = true;
      status.textContent = "Uploading " + files.length + " file" + (files.length === 1 ? "" : "s") + "…";
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action);
      xhr.setRequestHeader("Accept", "application/json");
      xhr.setRequestHeader("X-CSRF-Token", csrfOf(form));
      xhr.timeout = 10 * 60 * 1000;
      xhr.upload.onprogress = function (e) {
        if (!e.lengthComputable) return;
        var sent = e.loaded / e.total * running;
        rows.forEach(function (row, i) {
          setProgress(row, files[i].size ? (sent - offsets[i]) / files[i].size : 1);
        });
      };
      xhr.onload = function () {
        var answer = null;
        try { answer = JSON.parse(xhr.responseText); } catch (e) { answer = null; }
        if (xhr.status === 202 && answer) {
          rows.forEach(function (row) { setProgress(row, 1); setOutcome(row, "queued", ""); });
          status.textContent = "Uploaded; importing…";
          followJob(answer);
          return;
        }
        var message = errorMessage(answer, "the upload failed (" + xhr.status + ")");
        if (xhr.status === 401) message = "Your session ended; sign in again.";
        rows.forEach(function (row) { setOutcome(row, "failed", message); });
        status.textContent = message;
        busy = false;
        button.disabled = false;
      };
      xhr.onerror = xhr.ontimeout = function () {
        status.textContent = "The upload did not reach the server; check the connection and try again.";
        rows.forEach(function (row) { setOutcome(row, "failed", "not sent"); });
        busy = false;
        button.disabled = false;
      };
      xhr.send(data);
    });
  }

  // -- the prompt editor ------------------------------------------------------------------
  function initEditor(form) {
    var previewUrl = form.getAttribute("data-preview");
    var runUrl = form.getAttribute("data-run");
    var out = document.getElementById("preview");
    var status = document.getElementById("preview-status");
    var runButton = document.getElementById("run-button");
    var previewButton = document.getElementById("preview-button");
    var llmOut = document.getElementById("llm-output");
    var llmStatus = document.getElementById("llm-status");
    var sequence = 0;
    var timer = null;

    function post(url) {
      var data = new URLSearchParams(new FormData(form));
      return fetch(url, {
        method: "POST",
        body: data,
        credentials: "same-origin",
        headers: { "Accept": "application/json", "X-CSRF-Token": csrfOf(form) }
      }).then(function (response) {
        return response.json().then(function (body) {
          if (!response.ok) throw new Error(errorMessage(body, "failed (" + response.status + ")"));
          return body;
        });
      });
    }

    function preview() {
      if (!out) return;
      var mine = ++sequence;
      status.textContent = "Rendering…";
      status.classList.remove("error");
      post(previewUrl).then(function (body) {
        if (mine !== sequence) return;
        out.textContent = body.prompt;
        status.textContent = "Rendered: " + num(body.characters) + " characters, about " + num(body.tokens) + " tokens.";
      }).catch(function (error) {
        if (mine !== sequence) return;
        status.textContent = error.message;
        status.classList.add("error");
      });
    }

    function later() {
      clearTimeout(timer);
      timer = setTimeout(preview, 350);
    }

    form.addEventListener("input", later);
    form.addEventListener("change", later);
    if (previewButton) previewButton.addEventListener("click", preview);
    if (runButton) {
      runButton.addEventListener("click", function () {
        runButton.disabled = true;
        llmStatus.textContent = "Asking the LLM…";
        llmStatus.classList.remove("error");
        llmOut.textContent = "";
        post(runUrl).then(function (body) {
          if (Array.isArray(body.output)) {
            var list = el("ul");
            body.output.forEach(function (item) { list.appendChild(el("li", {}, item)); });
            llmOut.appendChild(list);
          } else {
            llmOut.appendChild(el("p", {}, body.output));
          }
          var u = body.usage;
          llmStatus.textContent = u ? "Answered: " + costText(u) + "." : "Answered.";
        }).catch(function (error) {
          llmStatus.textContent = error.message;
          llmStatus.classList.add("error");
        }).then(function () { runButton.disabled = false; });
      });
    }
    preview();
  }

  // -- copy buttons -----------------------------------------------------------------------
  function initCopy(button) {
    var id = button.getAttribute("data-copy");
    var source = document.getElementById(id);
    var status = document.querySelector('[data-copy-status="' + id + '"]');
    button.addEventListener("click", function () {
      var text = source.textContent;
      function done(ok) {
        if (status) status.textContent = ok ? "Copied to the clipboard." : "Copy failed: select the text and copy it.";
      }
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallback(source)); });
      } else {
        done(fallback(source));
      }
    });
  }

  function fallback(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }

  // -- the sources page: a running sync's row shows its result once its job ends --------
  function initSyncPoll(badge) {
    pollJob(badge.getAttribute("data-sync-poll"), function (job) {
      if (job.status === "done" || job.status === "failed") {
        // the run is recorded just after its job ends: read the page again then
        setTimeout(function () { window.location.replace("/console/sources"); }, 300);
      }
    }, function (message) { badge.setAttribute("title", message); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-sync-poll]").forEach(initSyncPoll);
    var job = document.querySelector("[data-job-poll]");
    if (job) initJobPage(job);
    var upload = document.getElementById("upload-form");
    if (upload) initUpload(upload);
    var editor = document.getElementById("prompt-form");
    if (editor) initEditor(editor);
    document.querySelectorAll("[data-copy]").forEach(initCopy);
  });
})();
