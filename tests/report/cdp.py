"""A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe``.

Why a pipe: it needs no websocket library and no TCP port (the browser reads commands
on fd 3 and writes replies and events on fd 4, NUL-separated JSON), so the browser
test runs with nothing but Debian's ``chromium`` and the standard library. Events are
collected for the test to inspect (console messages, exceptions, log entries,
network requests).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

# Headless, no GPU, and nothing that talks to the network on its own; the proxy and
# resolver rules make any fetch the page would try fail instead of leaving the box.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
    "--window-size=1280,900",
)


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with one page, driven over the DevTools pipe."""

    def __init__(self, executable: str, profile: Path) -> None:
        cmd_r, self._cmd_w = os.pipe()  # we write commands, the browser reads fd 3
        self._out_r, out_w = os.pipe()  # the browser writes fd 4, we read

        def wire() -> None:  # runs in the child before exec
            os.dup2(cmd_r, 3)
            os.dup2(out_w, 4)

        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"],
            preexec_fn=wire,
            pass_fds=(3, 4),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(cmd_r)
        os.close(out_w)
        self.events: list[dict[str, Any]] = []
        self._replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.call(f"{domain}.enable", session=True)

    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._out_r, "rb", buffering=0) as pipe:
            while chunk := pipe.read(65536):
                buf += chunk
                *messages, buf = buf.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._replies.put(message)
                    else:
                        self.events.append(message)

    def call(
        self, method: str, session: bool = False, timeout: float = 60.0, **params: Any
    ) -> dict[str, Any]:
        """Send one command and wait for its reply (raises on a protocol error)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._replies.get(timeout=max(0.1, deadline - time.monotonic()))
            if reply["id"] == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str, timeout: float = 90.0) -> None:
        """Navigate and wait until the expression ``ready`` is true in the page."""
        self.call("Page.navigate", session=True, url=url)
        deadline = time.monotonic() + timeout
        while not self.evaluate(ready):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url}: not ready after {timeout}s ({ready})")
            time.sleep(0.25)

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (not just the window)."""
        import base64

        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        shot = self.call(
            "Page.captureScreenshot",
            session=True,
            format="png",
            captureBeyondViewport=True,
            clip=clip,
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, error log entries (CSP violations,
        failed loads) and any request that is not a local file, as readable lines."""
        found = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                url = str(params["request"]["url"])
                if not url.startswith(("file:", "data:", "blob:", "about:")):
                    found.append(f"network request: {url}")
        return found

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, queue.Empty, OSError):
            self.call("Browser.close", timeout=10)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._cmd_w)
