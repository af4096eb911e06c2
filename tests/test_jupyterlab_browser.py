"""The series works in JupyterLab itself, as a learner uses it: a real browser runs a notebook
that does what the series' notebooks do (Ray's core, a distributed rlkit run with its progress
bar, a figure, ``ray.shutdown()``), and measures the text of every architecture diagram in 04-07.

nbval runs the notebooks through a kernel only, each once; a real browser re-running a whole
notebook of the series would repeat that training and check nothing more about the browser, so
the notebook run here is small and of its own.

A JupyterLab server (127.0.0.1, a free port, a random token, its config, runtime, data,
settings and workspace dirs and IPYTHONDIR in a temporary folder, so the user's own settings
are neither read nor touched) serves that notebook and *copies* of the series' notebooks in a
temporary folder; the files in the repository are never opened by JupyterLab, so they cannot be
saved with outputs. Headless Chromium (Debian's
``chromium`` package, driven by Playwright; Playwright's own browser download is not used)
opens it, waits until the kernel is connected and idle, clicks *Run > Run All Cells*, and waits
until the notebook's kernel is idle again and every code cell has an execution count.

Skipped, with the reason, where no Chromium binary is found or Playwright is not installed
(``.ci/run`` installs Debian's chromium when it can).

Everything started here is stopped here: the browser (Playwright's context manager), the
JupyterLab server (SIGTERM, which also shuts its kernels down, then SIGKILL after 30 s), and
every process that ever descended from the server (kernels, and the Ray cluster that the
notebook's kernel starts): those still alive 15 s after the server exits are killed and
reported as a leak.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from conftest import RAY_CORE_CELL

from rlkit.distributed.runtime.cluster import free_local_port

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
#: Run All in the browser: what every notebook of the series does, in a few seconds of
#: training (the series itself runs under nbval): the imports and ``init_ray`` of its first
#: cells, Ray's core (a task, an actor, ``ray.wait``), a distributed rlkit run with its progress
#: bar and every role as a Ray actor, an inline figure, and ``ray.shutdown()`` last.
SERIES_LIKE_CELLS = [
    """%matplotlib inline
import matplotlib.pyplot as plt
import ray
from rlkit.algos.a2c import A2CConfig
from rlkit.distributed.a3c.driver import train_a3c_ray
from rlkit.distributed.runtime.cluster import init_ray
resources = init_ray()
assert ray.is_initialized() and resources["CPU"] >= 1""",
    RAY_CORE_CELL,
    """config = A2CConfig(total_steps=4_000, eval_every=2_000, eval_episodes=2,
                   target_return=None)
result = train_a3c_ray(config, progress=True)
assert result.env_steps >= config.total_steps and result.history.eval_returns""",
    """fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(result.history.eval_steps, result.history.eval_returns, marker="o")
ax.set_xlabel("env steps"); ax.set_ylabel("greedy return")
plt.show()""",
    # the run's timeline, and one of 16 lanes (the most a notebook of the series draws)
    """from rlkit.core.timeline import Span
from rlkit.notebook.timeline_plot import plot_timeline
plot_timeline(result.timeline, result.wall_seconds, title="A3C, the whole run")
plt.show()
lanes = [Span(f"worker {i}", "fragment", 0.1 * i, 0.1 * i + 0.5) for i in range(14)]
plot_timeline(lanes + [Span("driver", "fragment", 0.0, 0.1), Span("learner", "train", 0.0, 2.0)],
              2.0, title="16 lanes")
plt.show()""",
    "ray.shutdown()\nassert not ray.is_initialized()",
]
RUN_TIMEOUT_S = 300  # about 30 s on the 2-core VM; a 3x slower, loaded machine stays well inside
#: The notebooks whose Mermaid diagrams are measured, and the smallest text allowed (CSS px as
#: drawn on the page, at the viewport below with JupyterLab's default layout).
DIAGRAM_NOTEBOOKS = ("04_apex_prioritized_replay.ipynb", "05_a3c_gradient_server.ipynb",
                     "06_impala_vtrace.ipynb", "07_cluster.ipynb")
MIN_DIAGRAM_TEXT_PX = 9.0
RAY_PROCESS_NAMES = ("raylet", "gcs_server", "ray::")  # as in conftest.our_ray_processes
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def _chromium() -> str | None:
    """Debian's chromium (``/usr/bin/chromium``) or a ``chromium`` on PATH; None if neither."""
    for candidate in ("/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM = _chromium()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.ray,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (/usr/bin/chromium or "
                       "`chromium` on PATH); on Debian/Ubuntu: apt-get install chromium"),
]

# JupyterLab settings for this server only (its settings dir is temporary): attach every cell
# to the page (the default windowing mode may leave off-screen cells out of the DOM or unrendered,
# and the checks below read the DOM), and do not ask about or fetch Jupyter news.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}

# One JavaScript snapshot of the open notebook, read from JupyterLab's notebook model (exposed by
# --LabApp.expose_app_in_browser) and from the page. ``errors`` follows the docstring of
# test_notebook_runs_in_jupyterlab.
SNAPSHOT_JS = r"""() => {
  const panel = window.jupyterapp.shell.currentWidget;
  if (!panel || !panel.content || !panel.content.model) return null;
  const cells = [];
  for (let i = 0; i < panel.content.model.cells.length; i++) {
    cells.push(panel.content.model.cells.get(i).toJSON());
  }
  const code = cells.filter(c => c.cell_type === "code");
  const errors = [];
  code.forEach((c, i) => (c.outputs || []).forEach(o => {
    if (o.output_type === "error") {
      errors.push(`code cell ${i + 1}: ${o.ename}: ${o.evalue}`);
    }
  }));
  for (const el of panel.node.querySelectorAll(
      '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]')) {
    if (el.textContent.includes("Traceback (most recent call last)")) {
      errors.push("traceback on stderr: " + el.textContent.slice(0, 2000));
    }
  }
  for (const el of panel.node.querySelectorAll('.jp-OutputArea-output[data-mime-type]')) {
    const mime = el.dataset.mimeType;
    if (mime.includes("error") || mime.includes("traceback")) errors.push("output of type " + mime);
  }
  const status = [...document.querySelectorAll("#jp-main-statusbar .jp-StatusBar-TextItem")]
      .map(e => e.textContent.trim()).find(t => t.includes("(ipykernel) |")) || "";
  const indicator = panel.node.querySelector(".jp-Notebook-ExecutionIndicator")
      || document.querySelector(".jp-Notebook-ExecutionIndicator");
  return {
    codeCells: code.length,
    counted: code.filter(c => Number.isInteger(c.execution_count)).length,
    prompts: [...panel.node.querySelectorAll(".jp-CodeCell .jp-InputPrompt")]
        .map(e => e.textContent.trim()),
    images: [...panel.node.querySelectorAll(".jp-OutputArea-output img")]
        .filter(img => img.complete && img.naturalWidth > 0).length,
    scales: [...panel.node.querySelectorAll(".jp-OutputArea-output img")]
        .filter(img => img.complete && img.naturalWidth > 0)
        .map(img => img.getBoundingClientRect().width / img.naturalWidth),
    indicator: indicator ? indicator.dataset.status : null,
    kernelStatus: status.split("|").pop().trim(),
    errors: errors,
  };
}"""


def _ray_processes(procs: list[psutil.Process]) -> list[str]:
    """Command lines of the Ray processes (raylet, GCS, ``ray::`` workers) among ``procs``."""
    found = []
    for proc in procs:
        try:
            text = " ".join(proc.cmdline()) + " " + proc.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if any(name in text for name in RAY_PROCESS_NAMES):
            found.append(f"{proc.pid}: {text[:100]}")
    return found


class Lab:
    """A JupyterLab server of our own, with every process it ever had under it remembered."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port, self.token = free_local_port(), secrets.token_urlsafe(24)
        self.url = f"http://127.0.0.1:{self.port}"
        self.descendants: dict[int, psutil.Process] = {}
        env = dict(os.environ)
        for var, name in [("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                          ("JUPYTER_DATA_DIR", "data"), ("JUPYTERLAB_SETTINGS_DIR", "settings"),
                          ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"), ("IPYTHONDIR", "ipython")]:
            (root / "home" / name).mkdir(parents=True)
            env[var] = str(root / "home" / name)
        for rel, values in LAB_SETTINGS.items():
            path = root / "home" / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env.pop("RAY_ADDRESS", None)  # the notebook starts a local cluster of its own
        (root / "notebooks").mkdir()
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={root / 'notebooks'}",
               "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log_path = root / "jupyterlab.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def wait_until_up(self, timeout: float = 120.0) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                with opener.open(f"{self.url}/api/status?token={self.token}",
                                 timeout=5) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def remember_descendants(self) -> list[psutil.Process]:
        """The server's processes now (kernels, the Ray cluster a kernel started), remembered
        so that teardown can check that each of them is gone, even one orphaned on the way."""
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        for child in children:
            self.descendants.setdefault(child.pid, child)
        return children

    def stop(self) -> list[str]:
        """Stop the server and everything under it; return what had to be killed."""
        self.remember_descendants()
        self.proc.terminate()  # jupyter_server shuts its kernels down on SIGTERM
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        procs = list(self.descendants.values())
        _, alive = psutil.wait_procs(procs, timeout=15)
        leaked = []
        for proc in alive:
            try:
                leaked.append(f"{proc.pid}: {' '.join(proc.cmdline())[:100]}")
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=10)
        return leaked


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A running JupyterLab server serving a temporary folder; stopped, with all its
    processes, at the end."""
    server = Lab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.wait_until_up()
        yield server
    finally:
        leaked = server.stop()
    assert not leaked, f"processes left running after JupyterLab stopped (killed now): {leaked}"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="Playwright is not installed (pip install -r "
                                          "requirements.txt)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def _open(browser, lab: Lab, name: str):
    """A page with notebook ``name`` open, its kernel connected and idle."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(120_000)
    page.goto(f"{lab.url}/lab/tree/{name}?reset&token={lab.token}")  # reset: no other tab
    # the status bar names the kernel and its state once the kernel is connected; running
    # before that can lose the command (JupyterLab is still connecting the session)
    page.wait_for_function(r"""() => [...document.querySelectorAll(
        "#jp-main-statusbar .jp-StatusBar-TextItem")].some(
        e => /\(ipykernel\) \| Idle/.test(e.textContent))""")
    page.wait_for_function(SNAPSHOT_JS)  # the notebook model is loaded
    return page


def _run_all(page) -> None:
    page.get_by_role("menuitem", name="Run", exact=True).click()
    item = page.locator('li.lm-Menu-item[data-command="runmenu:run-all"]')
    item.wait_for(state="visible")
    item.click()


def test_notebook_runs_in_jupyterlab(browser, lab):
    """Run All Cells in JupyterLab on a notebook like the series' (``SERIES_LIKE_CELLS``):
    every code cell runs, none fails, the progress bar and the figure are shown, and the
    notebook's Ray cluster is gone at the end.

    A failure ("error output") is any of:

    * an output whose nbformat ``output_type`` is ``"error"``, read from JupyterLab's notebook
      model: what an exception that escapes a cell produces. (In the page an error and a
      stderr stream look the same: both are ``.jp-RenderedText`` with the mime type
      ``application/vnd.jupyter.stderr``, so the page alone cannot tell them apart.)
    * stderr text (``.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]``)
      containing ``Traceback (most recent call last)``: an exception printed rather than
      raised, e.g. one in a Ray worker that ``log_to_driver`` forwards to the notebook.
    * an output area rendered with a mime type containing ``error`` or ``traceback``.

    Other stderr text is allowed: Ray logs warnings there (e.g. that it wrote a token file).
    A run stops at the first exception, so the wait ends as soon as an error shows up.
    """
    import nbformat

    name = "series_like.ipynb"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in SERIES_LIKE_CELLS])
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, lab.root / "notebooks" / name)
    expected_code_cells = len(SERIES_LIKE_CELLS)
    page = _open(browser, lab, name)
    try:
        before = page.evaluate(SNAPSHOT_JS)
        assert before["codeCells"] == expected_code_cells and before["counted"] == 0, before
        _run_all(page)
        t0 = time.monotonic()
        while True:
            lab.remember_descendants()
            snap = page.evaluate(SNAPSHOT_JS)
            done = (snap["counted"] == snap["codeCells"] and snap["indicator"] == "idle"
                    and snap["kernelStatus"] == "Idle")
            if done or snap["errors"]:
                break
            assert time.monotonic() - t0 < RUN_TIMEOUT_S, (
                f"not finished after {RUN_TIMEOUT_S} s: {snap['counted']} of "
                f"{snap['codeCells']} code cells ran, indicator {snap['indicator']!r}, "
                f"kernel {snap['kernelStatus']!r}, prompts {snap['prompts']}")
            page.wait_for_timeout(250)  # poll; the kernel's output arrives meanwhile
        assert not snap["errors"], "\n\n".join(snap["errors"])
        assert all(re.fullmatch(r"\[\d+\]:", p) for p in snap["prompts"]), snap["prompts"]
        assert len(snap["prompts"]) == expected_code_cells, snap["prompts"]
        assert snap["images"] == 3, "the figure and the two timelines were not all shown"
        # at JupyterLab's default width every figure is drawn at its own size, not shrunk: the
        # timelines' lane labels (8 pt at the inline backend's 100 dpi, 11 px; their spacing is
        # checked in test_notebook_helpers) stay as legible as they were drawn
        assert all(scale > 0.99 for scale in snap["scales"]), snap["scales"]
        bar = page.locator(".rlkit-progress")
        assert bar.count() == 1 and bar.get_attribute("data-state") == "done", (
            "the training run's progress bar was not shown, or did not end full (budget used)")

        # the last cell ran ray.shutdown(): no Ray process is left under the kernel
        deadline = time.monotonic() + 30
        while (left := _ray_processes(lab.remember_descendants())) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"Ray processes left after ray.shutdown(): {left}"
    finally:
        page.close()


# Every change to the page while the cell below runs: the tqdm widget's count and the kernel
# status shown in the status bar at that moment.
OBSERVE_JS = r"""() => {
  const panel = window.jupyterapp.shell.currentWidget;
  window.__seen = [];
  const record = () => {
    const text = panel.node.querySelector(".jp-OutputArea")?.textContent || "";
    const m = text.match(/(\d+)\/(\d+)/);
    const status = [...document.querySelectorAll("#jp-main-statusbar .jp-StatusBar-TextItem")]
        .map(e => e.textContent.trim()).find(t => t.includes("(ipykernel) |")) || "";
    window.__seen.push({n: m ? +m[1] : null, total: m ? +m[2] : null,
                        status: status.split("|").pop().trim(),
                        prompt: panel.node.querySelector(".jp-InputPrompt").textContent.trim()});
  };
  new MutationObserver(record).observe(document.body,
      {subtree: true, childList: true, characterData: true, attributes: true});
}"""

WIDGET_CELL = """\
import time
from tqdm.auto import tqdm  # a progress-bar widget, as a learner's own code may show
for _ in tqdm(range(16)):
    time.sleep(0.5)
"""


def test_status_bar_shows_busy_while_a_widget_cell_runs(browser, lab):
    """The status bar says "Busy" for as long as a cell with a progress-bar widget runs.

    With ipykernel 7 it said "Idle" from half a second into such a cell until its end: the
    widget manager asks the kernel for a subshell (``create_subshell_request``, on the control
    channel) when the first widget opens, the kernel publishes busy/idle for that request, and
    JupyterLab shows the last status published, "idle". ipykernel 6 offers no subshells, so
    none is requested (requirements.txt pins it). Every page change is recorded while the loop
    runs (tqdm count ``0 < n < total``: the cell is certainly executing), so the check does
    not depend on timing.
    """
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(WIDGET_CELL)])
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, lab.root / "notebooks" / "widget_status.ipynb")
    page = _open(browser, lab, "widget_status.ipynb")
    try:
        page.evaluate(OBSERVE_JS)
        _run_all(page)
        page.wait_for_function(r"""() => /^\[\d+\]:$/.test(window.jupyterapp.shell.currentWidget
            .node.querySelector(".jp-InputPrompt").textContent.trim())""", timeout=120_000)
        lab.remember_descendants()
        snap = page.evaluate(SNAPSHOT_JS)
        assert not snap["errors"], "\n\n".join(snap["errors"])
        seen = page.evaluate("window.__seen")
        running = [s for s in seen if s["n"] is not None and 0 < s["n"] < s["total"]]
        assert len({s["n"] for s in running}) >= 5, f"progress bar not seen running: {seen[-20:]}"
        not_busy = [s for s in running if s["status"] != "Busy"]
        assert not not_busy, (f"status bar not 'Busy' while the cell ran (tqdm count n of total): "
                              f"{not_busy[:5]} ... ({len(not_busy)} of {len(running)} changes)")
    finally:
        page.close()


BAR_CELL = """\
from rlkit.notebook.progress import ProgressBar
bar = ProgressBar(True, 10_000, 0, "DQN")  # rlkit's training bar: plain HTML, no widget
for step in range(1_000, 5_000, 1_000):
    bar.update(step, eval="-300")
bar.close(True, eval="475")  # solved early
"""


def test_a_solved_training_bar_ends_green_and_survives_save_and_reopen(browser, lab):
    """rlkit's progress bar ends full and green when the run solved early, with the final
    evaluation shown; saved and reopened, the notebook shows the same bar (a widget would
    show "Error displaying widget: model not found" there)."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(BAR_CELL)])
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, lab.root / "notebooks" / "bar_end.ipynb")
    done = '.rlkit-progress[data-state="done"]'
    page = _open(browser, lab, "bar_end.ipynb")
    try:
        _run_all(page)
        page.wait_for_selector(done, timeout=120_000)
        assert "eval=475" in page.inner_text(done)
        assert page.locator('.rlkit-progress[data-state="running"]').count() == 0
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(r"""() => !window.jupyterapp.shell.currentWidget.context.model
            .dirty""")
    finally:
        page.close()
    saved = nbformat.read(lab.root / "notebooks" / "bar_end.ipynb", as_version=4)
    kinds = {k for out in saved.cells[0].outputs for k in out.get("data", {})}
    assert "application/vnd.jupyter.widget-view+json" not in kinds and "text/html" in kinds
    page = _open(browser, lab, "bar_end.ipynb")  # reopened from disk
    try:
        page.wait_for_selector(done, timeout=60_000)
        assert "Error displaying widget" not in page.inner_text(".jp-Notebook")
    finally:
        page.close()


# Every Mermaid diagram of the open notebook, measured. JupyterLab draws a diagram as an <img>
# of an SVG whose viewBox is the diagram's own size, scaled to fit the cell: a wide diagram
# shrinks its text. Each SVG is parsed again into a hidden box of the image's drawn width, so
# that its own style sheet gives each label's font size; times the image's scale, that is the
# label's text height on the page.
DIAGRAM_TEXT_JS = r"""() => {
  const found = [];
  for (const img of document.querySelectorAll(".jp-RenderedMermaid img")) {
    const source = decodeURIComponent(img.src.slice(img.src.indexOf(",") + 1));
    const box = document.createElement("div");
    box.style.cssText = "position: absolute; left: -20000px; top: 0; width: "
        + img.getBoundingClientRect().width + "px";
    box.innerHTML = source.slice(source.indexOf("<svg"));
    document.body.appendChild(box);
    const svg = box.querySelector("svg");
    const scale = img.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const labels = [...svg.querySelectorAll(".nodeLabel, .edgeLabel, .cluster-label, text")]
        .filter(e => e.textContent.trim() && !e.querySelector(".nodeLabel, .edgeLabel"));
    const sized = labels.map(e => ({text: e.textContent.trim().slice(0, 40),
                                    px: parseFloat(getComputedStyle(e).fontSize) * scale}));
    box.remove();
    sized.sort((a, b) => a.px - b.px);
    found.push({width: img.getBoundingClientRect().width, scale: scale,
                labels: sized.length, smallest: sized[0] || null});
  }
  return found;
}"""


@pytest.mark.parametrize("name", DIAGRAM_NOTEBOOKS)
def test_every_diagram_text_is_legible_at_the_default_width(browser, lab, name):
    """Each Mermaid diagram of notebooks 04-07, as JupyterLab draws it in a 1400 px wide window
    with its default layout (file browser open): every label's text is at least
    ``MIN_DIAGRAM_TEXT_PX`` high. Nothing is run: markdown renders without the kernel."""
    notebook = NOTEBOOKS / name
    blocks = sum("".join(c["source"]).count("```mermaid")
                 for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "markdown")
    assert blocks >= 1, f"{name} has no Mermaid diagram to measure"
    shutil.copy(notebook, lab.root / "notebooks" / name)
    page = _open(browser, lab, name)
    try:
        page.wait_for_function(f"""() => [...document.querySelectorAll(
            ".jp-RenderedMermaid img")].filter(i => i.complete && i.naturalWidth > 0).length
            >= {blocks}""")
        diagrams = page.evaluate(DIAGRAM_TEXT_JS)
    finally:
        page.close()
    assert len(diagrams) == blocks, diagrams
    for diagram in diagrams:
        assert diagram["labels"] >= 3, f"no labels found in a diagram of {name}: {diagram}"
        smallest = diagram["smallest"]
        assert smallest["px"] >= MIN_DIAGRAM_TEXT_PX, (
            f"{name}: the label {smallest['text']!r} is drawn {smallest['px']:.1f} px high (the "
            f"diagram, {diagram['width']:.0f} px wide, is scaled by {diagram['scale']:.2f}); "
            f"lay it out top to bottom or shorten its widest row")
