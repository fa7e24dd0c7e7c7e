/* toolhub admin helpers: copy buttons, config tabs, JSON fields (format + live check), type help.
   No network access and no libraries: plain DOM. */
(function () {
  "use strict";
  // Loaded once per page even when both a ModelAdmin's Media and a template include it.
  if (window.toolhubAdminLoaded) { return; }
  window.toolhubAdminLoaded = true;

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    // Fallback for plain-HTTP hosts where the Clipboard API is unavailable.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } finally { document.body.removeChild(area); }
    return Promise.resolve();
  }

  function setupCopyButtons() {
    document.querySelectorAll(".toolhub-copy").forEach(function (button) {
      button.addEventListener("click", function () {
        var target = document.querySelector(button.getAttribute("data-copy-target"));
        if (!target) { return; }
        var label = button.textContent;
        copyText(target.textContent).then(function () {
          button.textContent = "Copied";
          button.classList.add("toolhub-copied");
          setTimeout(function () { button.textContent = label; button.classList.remove("toolhub-copied"); }, 1500);
        }, function () { button.textContent = "Select and copy manually"; });
      });
    });
  }

  function setupTabs() {
    document.querySelectorAll("[data-toolhub-tabs]").forEach(function (box) {
      var tabs = box.querySelectorAll(".toolhub-tab");
      tabs.forEach(function (tab) {
        tab.addEventListener("click", function () {
          tabs.forEach(function (other) {
            other.classList.toggle("active", other === tab);
            var panel = box.querySelector("#" + other.getAttribute("data-tab"));
            if (panel) { panel.hidden = other !== tab; }
          });
        });
      });
    });
  }

  function checkJson(area, status) {
    var text = area.value;
    if (text.trim() === "") {
      area.classList.remove("toolhub-invalid");
      status.classList.remove("toolhub-invalid");
      status.textContent = "";
      return;
    }
    try {
      JSON.parse(text);
      area.classList.remove("toolhub-invalid");
      status.classList.remove("toolhub-invalid");
      status.textContent = "Valid JSON";
    } catch (error) {
      area.classList.add("toolhub-invalid");
      status.classList.add("toolhub-invalid");
      status.textContent = error.message + " (the server reports the line and column on save)";
    }
  }

  function setupJsonFields() {
    document.querySelectorAll("textarea.toolhub-json").forEach(function (area) {
      var status = document.createElement("span");
      status.className = "toolhub-json-status";
      var tools = document.createElement("div");
      tools.className = "toolhub-json-tools";
      var format = document.createElement("button");
      format.type = "button";
      format.className = "button";
      format.textContent = "Format JSON";
      format.addEventListener("click", function () {
        try {
          area.value = JSON.stringify(JSON.parse(area.value), null, 2);
        } catch (error) { /* leave invalid text as it is; the status shows why */ }
        checkJson(area, status);
      });
      tools.appendChild(format);
      tools.appendChild(status);
      // Below the field's flex row (label | editor), not inside it: a long status message there
      // would take its width from the editor.
      var row = area.closest(".flex-container") || area;
      row.insertAdjacentElement("afterend", tools);
      var timer = null;
      area.addEventListener("input", function () {
        clearTimeout(timer);
        // Large documents: check after typing pauses, not on every key.
        timer = setTimeout(function () { checkJson(area, status); }, area.value.length > 200000 ? 800 : 200);
      });
      area.addEventListener("keydown", function (event) {
        if (event.key === "Tab" && !event.shiftKey && !event.ctrlKey && !event.metaKey) {
          event.preventDefault();
          var start = area.selectionStart;
          area.setRangeText("  ", start, area.selectionEnd, "end");
        }
      });
    });
  }

  function setupTypeHelp() {
    var box = document.getElementById("toolhub-type-help");
    var select = document.getElementById("id_type");
    if (!box) { return; }
    if (!select) { box.classList.add("toolhub-no-js"); return; }
    function show() {
      box.querySelectorAll(".toolhub-help-item").forEach(function (item) {
        item.classList.toggle("active", item.getAttribute("data-tool-type") === select.value);
      });
    }
    select.addEventListener("change", show);
    show();
  }

  function setupConfirm() {
    document.querySelectorAll("[data-confirm]").forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (!window.confirm(button.getAttribute("data-confirm"))) { event.preventDefault(); }
      });
    });
  }

  // Change-list actions that need a confirmation: a <script type="application/json"
  // id="toolhub-action-confirms"> maps action names to questions ("{count}" = rows selected).
  function setupActionConfirm() {
    var source = document.getElementById("toolhub-action-confirms");
    var form = document.getElementById("changelist-form");
    if (!source || !form) { return; }
    var questions = JSON.parse(source.textContent);
    form.addEventListener("submit", function (event) {
      // "Save" of the editable columns is not an action.
      if (event.submitter && event.submitter.name === "_save") { return; }
      var action = form.querySelector("select[name=action]");
      var question = action && questions[action.value];
      if (!question) { return; }
      var across = form.querySelector("input[name=select_across]");
      var count = across && across.value === "1" ? "all matching" :
        String(form.querySelectorAll("input.action-select:checked").length);
      if (count === "0") { return; }  // the admin answers "Items must be selected" and changes nothing
      if (!window.confirm(question.replace("{count}", count))) { event.preventDefault(); }
    });
  }

  // Break points after "_" and "/" in long names (tool_names_like_this, /json/pointers), so a narrow
  // column wraps them between words rather than at any letter.
  function addSoftBreaks() {
    var cells = "#result_list tbody th, #result_list tbody td, #changelist-filter li a, .toolhub-id, .toolhub-steps a";
    document.querySelectorAll(cells).forEach(function (cell) {
      var walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      var nodes = [];
      while (walker.nextNode()) {
        var text = walker.currentNode;
        if (text.nodeValue.length > 8 && /[_/]/.test(text.nodeValue) && !text.parentNode.closest("select, textarea")) {
          nodes.push(text);
        }
      }
      nodes.forEach(function (node) {
        var parts = node.nodeValue.split(/(?<=[_/])/);
        var fragment = document.createDocumentFragment();
        parts.forEach(function (part, index) {
          if (index > 0) { fragment.appendChild(document.createElement("wbr")); }
          fragment.appendChild(document.createTextNode(part));
        });
        node.parentNode.replaceChild(fragment, node);
      });
    });
  }

  // Selects narrower than their longest option (the tool of each bound-tool row) cut the chosen name
  // short: its full text is the tooltip.
  function setupSelectTitles() {
    document.addEventListener("change", function (event) {
      if (event.target.matches(".inline-group select")) { showChoice(event.target); }
    });
    document.querySelectorAll(".inline-group select").forEach(showChoice);
  }

  function showChoice(select) {
    var option = select.options[select.selectedIndex];
    select.title = option && option.value ? option.text : "";
  }

  document.addEventListener("DOMContentLoaded", function () {
    addSoftBreaks();
    setupSelectTitles();
    setupCopyButtons();
    setupTabs();
    setupJsonFields();
    setupTypeHelp();
    setupConfirm();
    setupActionConfirm();
  });
})();
