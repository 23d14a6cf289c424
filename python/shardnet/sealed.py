"""The digests the broker sealed: what a resume checks a shard against.

The manifest beside a shard is written by whoever can write the checkpoint
directory, so a shard swapped together with its manifest passes it. The
broker fixed each rank's file digests when it sealed the checkpoint (every
rank's agent committed them); load() asks for them with the task's reader
token (SHARDNET_BROKER_TOKEN, set by the plugin: it reads the run and
changes nothing) at GET /v1/runs/RUN/checkpoints/NAME/files?rank=R.

The answer carries the file list's Merkle root as the seal recorded it
(and its receipt signed it: doc/receipts.md, "The file list") and, for each
of the rank's files, its leaf index and inclusion proof (RFC 9162): each
file is checked to be a leaf of that root, so a list changed in the
broker's store after the seal is refused. A seal made before the broker
kept roots has none (its receipt lists the files), and the list is taken
as it is. A run handed from a peer broker is answered from the seals its
decision carried, checked the same way.

When the broker cannot be asked (no broker in the environment, or it does
not answer), or cannot say (the run moved from a peer broker, which sealed
its earlier checkpoints: `sealed_elsewhere`), the shard is checked against
its manifest only, with a warning: a resume never fails because the broker is away (DESIGN.md,
invariant 3), and a shard still loads weights-only (no pickle runs code).
SHARDNET_REQUIRE_SEALED=1 refuses instead: the site or user who wants no
shard the broker has not vouched for.
"""
import hashlib
import json
import os
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request

from .errors import CheckpointError

TIMEOUT = 10  # seconds, per request
BUSY_WAIT = 120  # seconds a rank waits in all while the broker answers 429
MAX_ANSWER = 16 << 20  # bytes of one page of a rank's file list read at most


class Unavailable(Exception):
    """The broker's word cannot be had; str() says why."""


def required(env=None):
    return (os.environ if env is None else env).get("SHARDNET_REQUIRE_SEALED", "") == "1"


def files(run, name, rank, env=None):
    """{path: (sha256, bytes)} of rank's files of the sealed checkpoint name
    of run, as the broker sealed them. CheckpointError when the broker says it
    sealed no such checkpoint (or not with that rank); Unavailable when it
    cannot be asked."""
    env = os.environ if env is None else env
    url, token, ca = env.get("SHARDNET_BROKER_URL", ""), env.get("SHARDNET_BROKER_TOKEN", ""), env.get("SHARDNET_BROKER_CA", "")
    if not url or not token:
        raise Unavailable("no broker in the task environment (SHARDNET_BROKER_URL, SHARDNET_BROKER_TOKEN)")
    if not run:
        raise Unavailable("no run in the task environment (SHARDNET_RUN)")
    out, listed, sealed_list, start, pages = {}, [], None, 0, 0
    while True:
        answer = _page_when_served(url, token, ca, run, name, rank, start)
        # The broker answered 200: what it says is its word. An answer that is
        # not a file list, or names a file twice, is refused, never skipped.
        try:
            page = answer["files"]
            if pages and answer.get("list") != sealed_list:
                raise ValueError("its pages are of different lists")
            sealed_list = answer.get("list")
            if int(answer.get("from", 0)) != start:
                raise ValueError(f"the page asked from {start} starts at {answer.get('from')}")
            for f in page:
                path = str(f["path"])
                if path in out:
                    raise ValueError(f"{path} listed twice")
                out[path] = (str(f["sha256"]), int(f["bytes"]))
            listed.extend(page)
            nxt = answer.get("next_from")
            if nxt is not None and (int(nxt) != start + len(page) or not page):
                raise ValueError(f"next_from {nxt} is not the entry after the page")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"checkpoint {name}: the broker's answer is not a file list ({e})") from None
        pages += 1
        if nxt is None:
            break
        start = int(nxt)
    if not out:
        raise Unavailable("the broker's file list is empty")
    # A seal carried here from a peer broker: its list was checked against
    # its root on arrival and is this broker's word; its receipt is in the
    # sender's log (sender_receipt, the sender's claim), never this broker's.
    if answer.get("carried") and answer.get("receipt") is not None:
        raise CheckpointError(f"checkpoint {name}: the broker serves a seal carried from broker {answer.get('sealed_by')} "
                              "with a receipt as its own; a carried seal's receipt is its sender's claim (sender_receipt)")
    if sealed_list is not None:
        check_list(name, listed, sealed_list)
    return out


class _Busy(Exception):
    """429: the broker serves this token's list requests a few at a time."""

    def __init__(self, retry_after):
        super().__init__(retry_after)
        self.retry_after = retry_after


def _page_when_served(url, token, ca, run, name, rank, start):
    """_page, asked again after Retry-After while the broker answers 429 (a
    job's ranks share their token's few list requests in flight), for at
    most BUSY_WAIT seconds in all."""
    deadline = time.monotonic() + BUSY_WAIT
    while True:
        try:
            return _page(url, token, ca, run, name, rank, start)
        except _Busy as busy:
            wait = min(max(busy.retry_after, 0.1), 5.0) * (1 + random.random())
            if time.monotonic() + wait > deadline:
                raise Unavailable(f"the broker answered 429 (too many file list requests) for {BUSY_WAIT} s") from None
            time.sleep(wait)


def _page(url, token, ca, run, name, rank, start):
    """One page of rank's files from start, as the broker answered it (a dict)."""
    q = urllib.parse.quote
    req = urllib.request.Request(f"{url.rstrip('/')}/v1/runs/{q(run, safe='')}/checkpoints/{q(name, safe='')}/files"
                                 f"?rank={int(rank)}&from={int(start)}",
                                 headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
    ctx = None
    if url.startswith("https:"):
        ctx = ssl.create_default_context(cafile=ca or None)
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT, context=ctx) as r:
            body = r.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as e:
        try:
            err = json.loads(e.read(65536) or b"{}")
        except ValueError:
            err = {}
        code = err.get("error", {}).get("code") if isinstance(err.get("error"), dict) else err.get("code")
        message = (err.get("error", {}).get("message") if isinstance(err.get("error"), dict) else err.get("message")) or e.reason
        if e.code == 429:
            try:
                raise _Busy(float(e.headers.get("Retry-After", "1")))
            except ValueError:
                raise _Busy(1.0) from None
        if e.code == 404 and code in ("no_checkpoint", "no_rank"):
            raise CheckpointError(f"checkpoint {name}: the broker sealed no such files ({message})") from None
        # sealed_elsewhere: the run moved between brokers, and this one holds
        # no seal of it (the other may): not the broker's word either way.
        raise Unavailable(f"the broker answered HTTP {e.code}: {message}") from None
    except (urllib.error.URLError, OSError, ssl.SSLError) as e:
        raise Unavailable(f"the broker at {url} does not answer ({getattr(e, 'reason', e)})") from None
    if len(body) > MAX_ANSWER:
        raise Unavailable(f"a page of the broker's file list of rank {rank} is over {MAX_ANSWER >> 20} MiB: not read")
    try:
        answer = json.loads(body)
        if not isinstance(answer, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        raise CheckpointError(f"checkpoint {name}: the broker's answer is not a file list ({e})") from None
    return answer


def leaf_hash(path, sha256, size):
    """A file's leaf: its manifest line without the newline, as RFC 9162 hashes a leaf."""
    return hashlib.sha256(b"\x00" + f"{sha256} {size} {path}".encode()).digest()


def _node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def verify_inclusion(index, size, leaf, path, root):
    """RFC 9162 2.1.3.2: does path prove leaf at index in the tree of size leaves with root?"""
    if not 0 <= index < size:
        return False
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = _node(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def check_list(name, files, sealed_list):
    """Each of files (as the broker listed them, with index and inclusion) is a
    leaf of the list the seal committed to: CheckpointError naming the file
    when one is not."""
    try:
        root, count = bytes.fromhex(sealed_list["merkle_root"]), int(sealed_list["count"])
        if len(root) != 32:
            raise ValueError("merkle_root is not 32 bytes")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"checkpoint {name}: the broker's list root is unreadable ({e})") from None
    for f in files:
        try:
            proof = [bytes.fromhex(h) for h in f["inclusion"]]
            ok = verify_inclusion(int(f["index"]), count, leaf_hash(f["path"], f["sha256"], int(f["bytes"])), proof, root)
        except (ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            raise CheckpointError(f"checkpoint {name}: {f.get('path')!r} (sha256 {f.get('sha256')}) is not in the file list its seal "
                                  f"committed to (Merkle root {sealed_list.get('merkle_root')}, {count} files): the broker's record "
                                  "changed since the seal") from None
