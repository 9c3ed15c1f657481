#!/usr/bin/python3
"""The design sketched in the mission, faithfully: the asyncio peer of
bench/run.sh.

Python asyncio with aiohttp; one asyncio.Semaphore(32) held around the
whole attempt loop of a document (so a document sleeping out its backoff
keeps its slot, as the sketch does); full-jitter backoff
uniform(0, min(30, 0.5 * 2**attempt)) with attempt counted from 0;
Retry-After honoured by sleeping exactly that long; 5 attempts; a shared
budget of 3 x documents retries; transient = 429/500/502/503/504, timeouts
and resets; anything else fails the document at once.

Input: a file of lines "ID URL".  Bodies of successes go to OUTDIR/ID.
Output: one JSON line per document on stdout,
{"id": ..., "ok": true|false, "reason": ..., "attempts": n}, so a failure
is always reported.  Needs Debian's python3-aiohttp (/usr/bin/python3).
"""
import argparse
import asyncio
import email.utils
import json
import os
import random
import sys
import time

import aiohttp

TRANSIENT = {429, 500, 502, 503, 504}


def retry_after(value):
    """Seconds to wait from a Retry-After value, or None."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


async def fetch(session, sem, budget, doc_id, url, outdir, attempts):
    async with sem:
        reason = None
        for attempt in range(attempts):
            ra = None
            try:
                async with session.get(url) as resp:
                    if 200 <= resp.status <= 299:
                        body = await resp.read()
                        with open(os.path.join(outdir, doc_id), "wb") as f:
                            f.write(body)
                        return {"id": doc_id, "ok": True,
                                "reason": "http_%d" % resp.status,
                                "attempts": attempt + 1}
                    reason = "http_%d" % resp.status
                    if resp.status not in TRANSIENT:
                        return {"id": doc_id, "ok": False, "reason": reason,
                                "attempts": attempt + 1}
                    ra = retry_after(resp.headers.get("Retry-After"))
                    await resp.read()
            except asyncio.TimeoutError:
                reason = "timeout"
            except (aiohttp.ClientConnectionError,
                    aiohttp.ClientPayloadError):
                reason = "reset"
            except aiohttp.ClientError as e:
                return {"id": doc_id, "ok": False,
                        "reason": type(e).__name__, "attempts": attempt + 1}
            if attempt + 1 == attempts:
                break
            if budget[0] <= 0:
                return {"id": doc_id, "ok": False,
                        "reason": reason + ",budget_spent",
                        "attempts": attempt + 1}
            budget[0] -= 1
            if ra is not None:
                await asyncio.sleep(ra)
            else:
                await asyncio.sleep(
                    random.uniform(0, min(30, 0.5 * 2 ** attempt)))
        return {"id": doc_id, "ok": False, "reason": reason + ",exhausted",
                "attempts": attempts}


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("list", help='file of lines "ID URL"')
    ap.add_argument("--out", default="out", help="directory for bodies")
    ap.add_argument("-j", "--jobs", type=int, default=32)
    ap.add_argument("--attempts", type=int, default=5)
    ap.add_argument("--budget-x", type=float, default=3.0)
    ap.add_argument("--timeout", type=float, default=None,
                    help="total seconds per request (aiohttp default: 300)")
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    if a.seed is not None:
        random.seed(a.seed)
    docs = []
    with open(a.list) as f:
        for line in f:
            if line.strip():
                doc_id, url = line.split()
                docs.append((doc_id, url))
    os.makedirs(a.out, exist_ok=True)
    sem = asyncio.Semaphore(a.jobs)
    budget = [int(a.budget_x * len(docs))]
    timeout = (aiohttp.ClientTimeout(total=a.timeout) if a.timeout
               else aiohttp.ClientTimeout(total=300))
    async with aiohttp.ClientSession(timeout=timeout) as session:
        results = await asyncio.gather(*(
            fetch(session, sem, budget, d, u, a.out, a.attempts)
            for d, u in docs))
    out = sys.stdout
    for r in results:
        out.write(json.dumps(r) + "\n")
    out.flush()
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
