#!/usr/bin/python3
"""test_serve_page.py -- char_lm serve's page in a real browser (issue 34): Debian's headless
chromium, driven by chromedriver through python3-selenium.

    tests/browser/test_serve_page.py [--char-lm build/char_lm] [--run DIR] [--shots DIR]

Without --run it trains a tiny run first (a few seconds). It starts `char_lm serve --port 0` on
the run, then in the page: types a prompt and waits for generated text; hovers a character and
sees its distribution; opens the attention view and checks that every head of every layer has a
map of T x T cells (T: the prompt's length); opens the training view and checks that the loss
chart holds one point per row of metrics.csv. A screenshot of each view goes to --shots
(default build/browser): serve-sample.png, serve-attention.png, serve-training.png, serve-report.png.
Exit 0: passed; 1: a check failed (the message says which); 77: skipped (no chromium here).
Talks to 127.0.0.1 only; chromium gets a fresh profile and no network beyond it."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def start_serve(char_lm, run, log):
    proc = subprocess.Popen([char_lm, "serve", "--run", run, "--port", "0"], stdout=log, stderr=subprocess.STDOUT)
    t0 = time.time()
    while time.time() - t0 < 30:
        with open(log.name) as f:
            text = f.read()
        if "http://127.0.0.1:" in text:
            port = int(text.split("http://127.0.0.1:")[1].split("/")[0])
            return proc, "http://127.0.0.1:%d/" % port
        if proc.poll() is not None:
            sys.exit("serve ended: " + text)
        time.sleep(0.05)
    proc.kill()
    sys.exit("serve printed no URL")


def train_tiny(char_lm, root):
    text = os.path.join(root, "text.txt")
    with open("data/tinyshakespeare.txt", "rb") as f, open(text, "wb") as g:
        g.write(f.read(60000))
    run = os.path.join(root, "run")
    subprocess.run([char_lm, "train", "--data", text, "--out", run, "--config", "tiny", "--max-iters", "60",
                    "--eval-interval", "20", "--eval-iters", "2", "--log-dynamics", "--threads", "1"],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return run


def browser(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = find_chromium()
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,1000", "--user-data-dir=" + profile,
                 "--lang=en-US"):
        opts.add_argument(flag)
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(service=Service(driver), options=opts)


def wait(d, what, cond, timeout=30):
    from selenium.webdriver.support.ui import WebDriverWait
    try:
        return WebDriverWait(d, timeout).until(lambda _: cond())
    except Exception:
        sys.exit("FAILED: timed out waiting for " + what)


def check(ok, msg):
    if not ok:
        sys.exit("FAILED: " + msg)
    print("ok:", msg)


def sample_view(d, url, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.action_chains import ActionChains
    d.get(url)
    wait(d, "the run line", lambda: "iteration" in d.find_element(By.ID, "run-line").text)
    prompt = d.find_element(By.ID, "prompt")
    prompt.clear()
    prompt.send_keys("ROMEO:")
    n = d.find_element(By.ID, "n")
    n.clear()
    n.send_keys("200")
    d.find_element(By.ID, "go").click()
    wait(d, "200 generated characters", lambda: len(d.find_elements(By.CSS_SELECTOR, "#output .tok")) == 200)
    wait(d, "the done line", lambda: "200" in d.find_element(By.ID, "sample-status").text)
    text = d.find_element(By.ID, "output").text
    check(text.startswith("ROMEO:") and len(text) > 150, "typed a prompt, text appeared (%d characters)" % len(text))
    tok = d.find_elements(By.CSS_SELECTOR, "#output .tok")[40]
    ActionChains(d).move_to_element(tok).perform()
    wait(d, "the distribution box", lambda: d.find_element(By.ID, "dist").is_displayed())
    rows = d.find_elements(By.CSS_SELECTOR, "#dist .row")
    check(len(rows) == 5, "hovering a character shows its top-5 distribution")
    d.save_screenshot(os.path.join(shots, "serve-sample.png"))


def attention_view(d, shots, api):
    from selenium.webdriver.common.by import By
    d.find_element(By.CSS_SELECTOR, ".tab[data-view=attention]").click()
    prompt = "ROMEO: the king"
    wait(d, "the heat maps", lambda: len(d.find_elements(By.CSS_SELECTOR, "canvas.head-map")) > 0)
    run = api("/api/run")
    L, H = run["config"]["n_layer"], run["config"]["n_head"]
    maps = d.find_elements(By.CSS_SELECTOR, "canvas.head-map")
    check(len(maps) == L * H, "one map per head: %d layers x %d heads" % (L, H))
    T = len(prompt)
    for m in maps:
        t, cell = int(m.get_attribute("data-t")), int(m.get_attribute("data-cell"))
        w, h = int(m.get_attribute("width")), int(m.get_attribute("height"))
        if t != T or w != T * cell or h != T * cell or m.size["width"] != w:
            sys.exit("FAILED: layer %s head %s: a %dx%d map (shown %s) for T=%d, cell %d" % (
                m.get_attribute("data-layer"), m.get_attribute("data-head"), w, h, m.size, T, cell))
    check(True, "every head's map is %d x %d cells" % (T, T))
    d.save_screenshot(os.path.join(shots, "serve-attention.png"))
    maps[0].click()
    wait(d, "the enlarged head", lambda: d.find_element(By.ID, "zoom").is_displayed())
    d.save_screenshot(os.path.join(shots, "serve-attention-zoom.png"))
    d.find_element(By.ID, "zoom").click()


def training_view(d, shots, run_dir):
    from selenium.webdriver.common.by import By
    d.find_element(By.CSS_SELECTOR, ".tab[data-view=training]").click()
    with open(os.path.join(run_dir, "metrics.csv")) as f:
        rows = sum(1 for line in f if line.endswith("\n")) - 1
    canvas = lambda: d.find_element(By.ID, "chart-loss")
    wait(d, "the loss chart", lambda: canvas().get_attribute("data-points") is not None)
    got = int(canvas().get_attribute("data-points"))
    check(got == rows, "the training view shows %d points, metrics.csv has %d rows" % (got, rows))
    d.save_screenshot(os.path.join(shots, "serve-training.png"))
    d.find_element(By.ID, "lang").click()
    wait(d, "the Chinese words", lambda: d.find_element(By.CSS_SELECTOR, ".tab[data-view=training]").text == "训练")
    check(True, "the language switch gives the Chinese words")


def report_view(d, shots, run_dir):
    from selenium.webdriver.common.by import By
    d.find_element(By.CSS_SELECTOR, ".tab[data-view=report]").click()
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as f:
        first = f.readline().strip()
    wait(d, "the report", lambda: d.find_element(By.ID, "report-text").text.startswith(first))
    pics = sorted(p for p in ("loss.png", "dynamics.png", "activations.png", "lr_find.png", "attn.png")
                  if os.path.isfile(os.path.join(run_dir, p)))
    imgs = lambda: d.find_elements(By.CSS_SELECTOR, "#report-pictures img")
    wait(d, "the pictures", lambda: len(imgs()) == len(pics) and
         all(d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i) for i in imgs()))
    check(sorted(i.get_attribute("alt") for i in imgs()) == pics, "the report view shows report.md and %s" % pics)
    d.save_screenshot(os.path.join(shots, "serve-report.png"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--char-lm", default=os.environ.get("CHAR_LM", "build/char_lm"))
    ap.add_argument("--run")
    ap.add_argument("--shots", default="build/browser")
    a = ap.parse_args()
    if not find_chromium():
        print("test_serve_page: SKIPPED: no chromium here (make deps-browser installs chromium, chromium-driver, "
              "python3-selenium)")
        return SKIP
    try:
        import selenium  # noqa: F401
    except ImportError:
        print("test_serve_page: SKIPPED: no python3-selenium for %s (make deps-browser)" % sys.executable)
        return SKIP
    os.makedirs(a.shots, exist_ok=True)
    root = tempfile.mkdtemp(prefix="ag_browser_")
    proc = d = None
    try:
        run = a.run or train_tiny(a.char_lm, root)
        log = open(os.path.join(root, "serve.log"), "w")
        proc, url = start_serve(a.char_lm, run, log)
        api = lambda path: json.load(urllib.request.urlopen(url.rstrip("/") + path, timeout=30))
        d = browser(os.path.join(root, "profile"))
        sample_view(d, url, a.shots)
        attention_view(d, a.shots, api)
        training_view(d, a.shots, run)
        report_view(d, a.shots, run)
        console = [e for e in d.get_log("browser") if e.get("level") == "SEVERE"]
        check(not console, "no errors in the page's console %s" % (console or ""))
    finally:
        if d:
            d.quit()
        if proc:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=30)
            if code != 143:
                sys.exit("FAILED: serve exited %d after SIGTERM, not 143" % code)
        shutil.rmtree(root, ignore_errors=True)
    print("test_serve_page: passed; screenshots in %s" % os.path.abspath(a.shots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
