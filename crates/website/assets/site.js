// Context Source Graph: the site's script (served as one file with code.js). Pages work
// without it; it adds copy buttons. No inline code anywhere (Content-Security-Policy).
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

document.addEventListener("DOMContentLoaded", () => {
  copyButtons();
});
