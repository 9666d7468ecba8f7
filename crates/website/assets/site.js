// Context Source Graph: the site's script (served as one file with code.js and the other
// assets). Pages work without it; it adds copy buttons and keys. No inline code anywhere
// (Content-Security-Policy).
"use strict";

function copyButtons() {
  for (const button of document.querySelectorAll("button[data-copy]")) {
    button.addEventListener("click", async () => {
      const source = document.getElementById(button.dataset.copy);
      if (!source) return;
      try {
        await navigator.clipboard.writeText(source.textContent);
        button.textContent = "Copied";
      } catch (_) {
        // No clipboard (an insecure origin, say): select the text for a manual copy.
        const range = document.createRange();
        range.selectNodeContents(source);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        button.textContent = "Press Ctrl+C";
      }
    });
  }
}

// Whether a key press is typing (an input, a text area, a select, editable content): then
// the site's keys leave it alone.
function typing(target) {
  if (!target || !(target instanceof Element)) return false;
  return target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName);
}

// Keys, as on the code hosts: `/` focuses the search box; `y` goes to the same page at the
// full commit (the page's permalink), keeping the line range (`#L2-L4`).
function keys() {
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) return;
    if (event.key === "/") {
      const box = document.getElementById("site-search");
      if (!box) return;
      event.preventDefault();
      box.focus();
      box.select();
    } else if (event.key === "y") {
      const link = document.querySelector("a[data-permalink]");
      if (!link) return;
      event.preventDefault();
      window.location.assign(link.href.split("#")[0] + window.location.hash);
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  copyButtons();
  keys();
});
