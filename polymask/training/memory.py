"""Host memory and step time over a run, to show that neither grows: every metrics line records the
process's resident memory (``rss_mb``) and the mean training-step time since the previous line
(``step_s``); the summary records the peak and the growth after warm-up."""
from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass, field
from typing import Any


def rss_mb() -> float:
    """The process's resident set size now, in MiB (Linux ``/proc``; elsewhere its peak so far)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
        return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


@dataclass
class ResourceTrace:
    """This invocation's (step, rss_mb, step_s) at each metrics line. Samples after ``settled_step`` (the end of
    the learning-rate warm-up or the first evaluation, whichever is later: allocator pools have filled) count as
    settled: growth is the last settled RSS minus the first."""

    settled_step: int
    samples: list[tuple[int, float, float | None]] = field(default_factory=list)
    _last: tuple[int, float] | None = None

    def sample(self, step: int, train_time: float) -> dict[str, Any]:
        """The fields a metrics line adds at ``step`` (``train_time``: training seconds so far, eval excluded)."""
        step_s = None
        if self._last is not None and step > self._last[0]:
            step_s = round((train_time - self._last[1]) / (step - self._last[0]), 4)
        self._last = (step, train_time)
        rss = rss_mb()
        self.samples.append((step, rss, step_s))
        return {"rss_mb": rss, "step_s": step_s}

    def report(self) -> dict[str, Any]:
        """Peak RSS, and RSS and step time at the first and last settled samples, with the RSS growth between
        them; None where there are no settled samples (a short run or invocation)."""
        settled = [s for s in self.samples if s[0] > self.settled_step and s[2] is not None]
        peak = max((s[1] for s in self.samples), default=None)
        if len(settled) < 2:
            return {"peak_rss_mb": peak, "rss_growth_mb": None, "settled_from_step": None}
        first, last = settled[0], settled[-1]
        return {"peak_rss_mb": peak, "rss_growth_mb": round(last[1] - first[1], 1), "settled_from_step": first[0],
                "rss_mb_settled": first[1], "rss_mb_last": last[1], "step_s_settled": first[2], "step_s_last": last[2]}
