"""The web console (`console.enabled=true`) in a real headless browser
(Debian's Chromium, driven by Playwright) against a 3-server ensemble:
every action is taken through the page and checked through a separate
kazoo client; a person without rights is refused; each view is saved as a
screenshot in target/console-screenshots."""

import base64
import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kazoo.recipe.lock import Lock
from kazoo.security import make_acl, make_digest_acl
from playwright.sync_api import sync_playwright

from ensemble import Ensemble, wait_for
from zkharness import HOST, free_port

pytestmark = pytest.mark.paddock_only("the console is Paddock's")

CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "target" / "console-screenshots"
SUPER_DIGEST = "super:D/InIHSb7yEEbrWz8b9l71RjZJU="  # super:test


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    with Ensemble(tmp_path_factory.mktemp("console"), voters=3,
                  config={"DigestAuthenticationProvider.superDigest": SUPER_DIGEST}) as e:
        for member in e.members:
            member.admin_port = free_port()
            member.extra_config.update({"admin.enableServer": "true",
                                        "admin.serverAddress": HOST,
                                        "admin.serverPort": str(member.admin_port),
                                        "console.enabled": "true"})
        e.start()
        e.wait_all_serving()
        yield e


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def open_console(browser, member, user="alice", password="pw"):
    context = browser.new_context(http_credentials={"username": user, "password": password},
                                  viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"http://{HOST}:{member.admin_port}/console")
    page.wait_for_selector('#tree button.name[data-path="/zookeeper"]')
    return page


def screenshot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def open_node(page, path):
    """Opens every znode on the way to `path` in the tree, then selects it."""
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts)):
        parent = "/" + "/".join(parts[:depth])
        item = page.locator(f'#tree li[data-path="{parent}"]')
        if item.get_attribute("aria-expanded") != "true":
            item.locator(":scope > .row .toggle").click()
        page.wait_for_selector(f'#tree button.name[data-path="{"/" + "/".join(parts[:depth + 1])}"]')
    page.click(f'#tree button.name[data-path="{path}"]')
    page.wait_for_function(f"document.getElementById('node-path').textContent === {json.dumps(path)}")


def status(page):
    return page.inner_text("#status")


def act(page, selector, confirm=False):
    """Clicks what makes a change and waits until the page shows its
    outcome (it is busy until then)."""
    page.click(selector)
    if confirm:
        page.click("#confirm-ok")
    settled(page)


def settled(page):
    page.wait_for_function("!document.body.hasAttribute('aria-busy')")


def test_the_tree_is_browsed_and_changed_through_the_page(ensemble, browser):
    zk = ensemble.client(ensemble.leader())
    zk.create("/app", b'{"feature": true, "limit": 3}')
    zk.create("/app/binary", bytes([0, 1, 2, 255]))
    zk.create("/app/many")
    for start in range(0, 600, 200):
        t = zk.transaction()
        for i in range(start, start + 200):
            t.create(f"/app/many/c{i:03d}", b"")
        t.commit()
    page = open_console(browser, ensemble.followers()[0])

    open_node(page, "/app")
    assert '"feature": true' in page.inner_text("#node-data")
    assert "json" in page.inner_text("#node-data-kind")
    screenshot(page, "tree")
    open_node(page, "/app/binary")
    assert page.inner_text("#node-data") == "00 01 02 ff"

    # Edit with a version check, then a stale edit refused.
    open_node(page, "/app")
    page.fill("#edit-data", "edited")
    act(page, "#edit-save")
    assert zk.get("/app")[0] == b"edited"
    assert zk.get("/app")[1].version == 1
    assert page.inner_text("#edit-version") == "1"
    zk.set("/app", b"changed elsewhere")
    page.fill("#edit-data", "stale")
    act(page, "#edit-save")
    assert "version" in status(page), status(page)
    assert zk.get("/app")[0] == b"changed elsewhere"

    # Create and delete a child.
    open_node(page, "/app")
    page.fill("#create-name", "made-in-browser")
    page.fill("#create-data", "hello")
    act(page, "#create-submit")
    assert zk.get("/app/made-in-browser")[0] == b"hello"
    open_node(page, "/app/made-in-browser")
    act(page, "#delete-one", confirm=True)
    assert zk.exists("/app/made-in-browser") is None

    # A large node is listed a page at a time, and filtered.
    open_node(page, "/app/many")
    page.locator('#tree li[data-path="/app/many"] > .row .toggle').click()
    page.wait_for_selector("#tree .more button")
    listed = '#tree li[data-path="/app/many"] > ul > li[role="treeitem"]'
    assert page.locator(listed).count() == 500
    page.click("#tree .more button")
    page.wait_for_function(f"document.querySelectorAll('{listed}').length === 600")
    page.fill("#filter", "c05")
    page.wait_for_function(f"document.querySelectorAll('{listed}').length === 10")

    # Keyboard: down from the selected row, and open with the right arrow.
    page.focus('#tree button.name[data-path="/app"]')
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.path") == "/app/binary"

    # A recursive delete names the count and removes it all.
    open_node(page, "/app/many")
    page.click("#delete-all")
    page.wait_for_selector("#confirm[open]")
    assert "601 znodes" in page.inner_text("#confirm-text")
    page.click("#confirm-ok")
    settled(page)
    assert zk.exists("/app/many") is None
    assert "deleted 601 znodes" in status(page)


def test_a_person_without_rights_is_refused(ensemble, browser):
    zk = ensemble.client(ensemble.leader())
    zk.create("/secret", b"for alice", acl=[make_digest_acl("alice", "pw", all=True)])
    zk.create("/readable", b"r", acl=[make_acl("world", "anyone", read=True)])
    member = ensemble.followers()[1]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"http://{HOST}:{member.admin_port}/console", timeout=10)
    assert refused.value.code == 401
    assert "Basic" in refused.value.headers["WWW-Authenticate"]

    # Made-up credentials cost a session each, up to a bound: the idlest
    # makes room.
    before = int(member.four_letter("mntr").split("zk_num_alive_connections\t")[1].split()[0])
    for n in range(80):
        request = urllib.request.Request(
            f"http://{HOST}:{member.admin_port}/console/api/node?path=/",
            headers={"Authorization": "Basic " + base64.b64encode(f"guess{n}:pw".encode()).decode()})
        urllib.request.urlopen(request, timeout=10).read()
    after = int(member.four_letter("mntr").split("zk_num_alive_connections\t")[1].split()[0])
    assert after - before <= 64, (before, after)

    page = open_console(browser, member, user="bob", password="pw")
    page.wait_for_selector('#tree button.name[data-path="/secret"]')
    page.click('#tree button.name[data-path="/secret"]')
    assert wait_for(lambda: "not authorised" in status(page), timeout=10), status(page)
    screenshot(page, "refused")
    open_node(page, "/readable")
    page.fill("#edit-data", "bob was here")
    act(page, "#edit-save")
    assert "not authorised" in status(page), status(page)
    assert zk.get("/readable")[0] == b"r"

    alice = open_console(browser, member)
    open_node(alice, "/secret")
    assert alice.inner_text("#node-data") == "for alice"


def test_sessions_watches_recipes_and_the_ensemble(ensemble, browser):
    member = ensemble.followers()[0]
    holder = ensemble.client(member)
    holder.create("/owned", b"", ephemeral=True)
    holder.get("/app", watch=lambda event: None)
    session = f"{holder.client_id[0]:#x}"
    lock = Lock(holder, "/locks/job")
    assert lock.acquire(timeout=10)
    waiter = ensemble.client(member)
    waiting = threading.Thread(target=lambda: Lock(waiter, "/locks/job").acquire(timeout=30),
                               daemon=True)
    waiting.start()
    assert wait_for(lambda: len(holder.get_children("/locks/job")) == 2, timeout=10)

    page = open_console(browser, member, user="super", password="test")
    open_node(page, "/locks/job")
    page.click("#recipe-show")
    page.wait_for_function("document.querySelectorAll('#recipe-queue li').length === 2")
    first, second = page.locator("#recipe-queue li").all_inner_texts()
    assert session in first and "holds" in first and "waits" in second

    page.click("#tab-watches")
    page.wait_for_selector("#watches td")
    assert "/app" in page.inner_text("#watches")
    screenshot(page, "watches")

    page.click("#tab-ensemble")
    page.wait_for_function("document.querySelectorAll('#servers tbody tr').length === 3")
    roles = sorted(page.locator("#servers tbody td:nth-child(3)").all_inner_texts())
    assert roles == ["follower", "follower", "leader"], roles
    page.wait_for_timeout(3500)   # three samples for the charts
    screenshot(page, "ensemble")

    page.click("#tab-sessions")
    row = page.locator(f'#sessions tr[data-session="{session}"]')
    row.wait_for()
    assert "/owned" in row.inner_text()
    screenshot(page, "sessions")
    lock.release()
    row.locator("button").click()
    page.click("#confirm-ok")
    settled(page)
    assert "closed " + session in status(page), status(page)
    assert waiter.exists("/owned") is None
    waiting.join(timeout=30)
