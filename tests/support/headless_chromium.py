"""Debian's chromium, headless, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

No port is opened and no extra package is needed: the browser reads commands on fd 3 and writes answers
on fd 4, each a JSON message ended by NUL. The network is off twice over: every request goes to a proxy on
127.0.0.1:9 (nothing listens), and host names resolve to nothing. The Network domain still reports each
request the page *tried* to make, which is what the tests count.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, BINARIES) if path), None)


@dataclass(frozen=True)
class Rendered:
    requests: tuple[str, ...]  # every URL the page asked for, its own excepted
    value: Any  # what the check expression returned
    screenshot: bytes  # PNG of the whole page


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None, timeout: float = 60.0) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_event(self, method: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self._read(deadline))

    def _read(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe (did it crash?)")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)


@contextmanager
def chromium(binary: str, profile: Path, width: int = 1000, height: int = 1200) -> Iterator[_Pipe]:
    """A headless chromium with the network off; yields the DevTools pipe, closes the browser after."""
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--remote-debugging-pipe",
        "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--host-resolver-rules=MAP * ~NOTFOUND",
        "--no-first-run", "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
        f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank",
    ]
    # The protocol wants fds 3 and 4 exactly: the shell's exec puts the pipe ends there.
    script = f'exec 3<&{to_browser_r} 4>&{from_browser_w} {to_browser_r}<&- {from_browser_w}>&-; exec "$0" "$@"'
    proc = subprocess.Popen(
        ["bash", "-c", script, binary, *flags], pass_fds=(to_browser_r, from_browser_w),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(to_browser_r)
    os.close(from_browser_w)
    pipe = _Pipe(to_browser_w, from_browser_r)
    try:
        yield pipe
    finally:
        with suppress(OSError, RuntimeError, TimeoutError):
            pipe.send("Browser.close", timeout=10)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_browser_w)
        os.close(from_browser_r)


def render(binary: str, page: Path, check: str, profile: Path) -> Rendered:
    """Open ``page``, wait for its load event, evaluate ``check`` in it, take a full-page screenshot."""
    url = page.resolve().as_uri()
    with chromium(binary, profile) as pipe:
        target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        pipe.send("Network.enable", session=session)
        pipe.send("Page.enable", session=session)
        pipe.send("Page.navigate", {"url": url}, session=session)
        pipe.wait_event("Page.loadEventFired")
        value = pipe.send("Runtime.evaluate", {"expression": check, "returnByValue": True}, session=session)
        if "exceptionDetails" in value:
            raise RuntimeError(f"check failed in the page: {value['exceptionDetails']}")
        size = pipe.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = pipe.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}, session=session)
        requests = tuple(
            e["params"]["request"]["url"] for e in pipe.events if e.get("method") == "Network.requestWillBeSent" and e["params"]["request"]["url"] != url
        )
    return Rendered(requests, value["result"].get("value"), base64.b64decode(shot["data"]))


# Per chart: the series it says it drew, whether each left a visible mark in the SVG, its rendered size,
# and the smallest rendered text height (px) - readable at the page's width.
CHECK_CHARTS = """(() => {
  const charts = [...document.querySelectorAll('figure.chart')].map(fig => {
    const series = Number(fig.dataset.series);
    const drawn = [];
    for (let i = 0; i < series; i++) {
      const marks = [...fig.querySelectorAll(`[id="${fig.id}-series-${i}"], [id^="${fig.id}-series-${i}-"]`)];
      drawn.push(marks.some(m => { const b = m.getBoundingClientRect(); return b.width > 0 || b.height > 0; }));
    }
    const svg = fig.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const heights = svg ? [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
                                .map(t => t.getBoundingClientRect().height) : [];
    return {id: fig.id, series, drawn, width: box.width, height: box.height,
            minTextPx: heights.length ? Math.min(...heights) : 0};
  });
  return {charts, tables: document.querySelectorAll('table').length, scripts: document.scripts.length,
          text: document.body.innerText, pageWidth: document.documentElement.clientWidth};
})()"""
