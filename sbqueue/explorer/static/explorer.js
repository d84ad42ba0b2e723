// Refresh in place: each element with data-refresh="URL" data-every="SECONDS" gets the
// URL's HTML (a fragment the server renders) every so often. No framework, no build.
"use strict";
for (const box of document.querySelectorAll("[data-refresh]")) {
  const every = 1000 * Number(box.dataset.every || 5);
  const refresh = async () => {
    try {
      const response = await fetch(box.dataset.refresh, { credentials: "same-origin" });
      if (response.ok) { box.innerHTML = await response.text(); }
    } catch (_) { /* the next round tries again */ }
    setTimeout(refresh, every);
  };
  setTimeout(refresh, every);
}
