"""On-line forecasts in the style of the Network Weather Service (Wolski et al.).

A :class:`ForecasterBank` runs several cheap predictors side by side on one series (last
value, running mean, sliding means and medians, exponential smoothing at a few gains). Each
new measurement first scores every predictor's standing forecast, then updates it; the bank
answers with the forecast of the predictor whose error over the last ``window`` measurements
is lowest (mean squared error by default, or absolute), together with that error and the
predictor's name, so a client gets a confidence figure with every number.

Objects the runtimes read (the stable API):

* :class:`Forecast` ``(value, error, method)``: ``error`` is the chosen predictor's RMSE (or
  MAE) over the window, NaN until two measurements exist.
* :class:`LinkForecast` -- one link: ``update(latency=s, bandwidth=B/s)`` (or
  ``update_fit(hockney)``, or passively ``observe(nbytes, seconds)``); ``predict()`` gives
  ``LinkEstimate(latency, bandwidth)`` forecasts; ``time(nbytes)`` the predicted one-way time
  ``latency + nbytes / bandwidth`` (what the collectives tuner's cost models need).
* :class:`RankSpeedForecast` -- one rank's speed: ``update(speed)`` or
  ``update(work=w, seconds=s)``; ``predict()`` a Forecast of work units per second (what the
  domain balancer and the farm's chunk policy need).

Example::

    lf = LinkForecast()
    for lat, bw in measurements:
        lf.update(latency=lat, bandwidth=bw)
    est = lf.predict()            # est.latency.value, est.bandwidth.value, .error, .method
    t = lf.time(65536)
"""
from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque
from typing import Iterable, NamedTuple


__all__ = ["Forecast", "Forecaster", "LastValue", "RunningMean", "SlidingMean",
           "SlidingMedian", "ExpSmoothing", "default_forecasters", "ForecasterBank",
           "LinkEstimate", "LinkForecast", "RankSpeedForecast"]


class Forecast(NamedTuple):
    """A prediction, its recent error (same units; NaN while unknown) and the method used."""
    value: float
    error: float
    method: str


class Forecaster:
    """One predictor: ``predict()`` (NaN before the first value) and ``update(x)``."""
    name = "forecaster"

    def predict(self) -> float:
        """The forecast of the next value (NaN before any update)."""
        raise NotImplementedError

    def update(self, x: float) -> None:
        """Add one measured value."""
        raise NotImplementedError


class LastValue(Forecaster):
    """Forecast: the last value (NWS "last")."""
    name = "last"

    def __init__(self):
        self.x = math.nan

    def predict(self):
        """The last value."""
        return self.x

    def update(self, x):
        """Remember ``x``."""
        self.x = x


class RunningMean(Forecaster):
    """Forecast: the mean of every value so far."""
    name = "mean"

    def __init__(self):
        self.n, self.s = 0, 0.0

    def predict(self):
        """The running mean."""
        return self.s / self.n if self.n else math.nan

    def update(self, x):
        """Add ``x`` to the mean."""
        self.n += 1
        self.s += x


_TIE = 1.0 - 1e-12


class _WindowSum:
    """Sum of the last ``window`` values, O(1) per update.

    Kept by adding the new value and subtracting the one that leaves. Rounding error of
    that is about ``eps * window * peak``, with ``peak`` the largest sum since the last exact
    summation; once the sum has fallen below ``1e-6 * peak`` it is recomputed exactly, so the
    relative error stays below ~1e-8 even when squared errors fall by many orders of
    magnitude (squared bandwidth errors span 1e0..1e18)."""

    __slots__ = ("buf", "s", "peak")

    def __init__(self, window: int):
        self.buf = deque(maxlen=window)
        self.s = 0.0
        self.peak = 0.0

    def append(self, x: float) -> None:
        buf = self.buf
        if len(buf) == buf.maxlen:
            old = buf[0]
            buf.append(x)
            s = self.s + x - old
        else:
            buf.append(x)
            s = self.s + x
        a = abs(s)
        if a > self.peak:
            self.peak = a
        elif a < 1e-6 * self.peak:
            s = math.fsum(buf)
            self.peak = abs(s)
        self.s = s

    def __len__(self) -> int:
        return len(self.buf)

    def mean(self) -> float:
        n = len(self.buf)
        return self.s / n if n else math.nan


class SlidingMean(Forecaster):
    """Mean of the last ``window`` values (O(1) per update)."""

    def __init__(self, window: int):
        self.win = _WindowSum(window)
        self.name = f"mean{window}"

    @property
    def buf(self):
        """The values in the window, oldest first."""
        return self.win.buf

    def predict(self):
        """The mean over the window."""
        return self.win.mean()

    def update(self, x):
        """Add ``x``, dropping the oldest value beyond the window."""
        self.win.append(x)


class SlidingMedian(Forecaster):
    """Median of the last ``window`` values: a deque for age plus a sorted list (bisect), so
    an update costs O(log w) comparisons and one short memmove, and predict is O(1)."""

    def __init__(self, window: int):
        self.buf = deque(maxlen=window)
        self.sorted: list[float] = []
        self.name = f"median{window}"

    def predict(self):
        """The median over the window."""
        s = self.sorted
        n = len(s)
        if not n:
            return math.nan
        h = n // 2
        return s[h] if n % 2 else 0.5 * (s[h - 1] + s[h])

    def update(self, x):
        """Add ``x``, dropping the oldest value beyond the window."""
        if len(self.buf) == self.buf.maxlen:
            old = self.buf[0]
            del self.sorted[bisect_left(self.sorted, old)]
        self.buf.append(x)
        insort(self.sorted, x)


class ExpSmoothing(Forecaster):
    """``f <- f + gain * (x - f)``, started at the first value."""

    def __init__(self, gain: float):
        if not 0 < gain <= 1:
            raise ValueError(f"gain must be in (0, 1], got {gain}")
        self.gain, self.f = gain, math.nan
        self.name = f"exp{gain:g}"

    def predict(self):
        """The smoothed value."""
        return self.f

    def update(self, x):
        """Smooth ``x`` in with the gain."""
        self.f = x if math.isnan(self.f) else self.f + self.gain * (x - self.f)


def default_forecasters() -> list[Forecaster]:
    """The standard bank: last value, running mean, sliding mean 5/20, sliding median 5/31,
    exponential smoothing with gains 0.05, 0.2, 0.5."""
    return [LastValue(), RunningMean(), SlidingMean(5), SlidingMean(20), SlidingMedian(5),
            SlidingMedian(31), ExpSmoothing(0.05), ExpSmoothing(0.2), ExpSmoothing(0.5)]


class ForecasterBank:
    """NWS-style adaptive forecaster for one series (see the module docstring).

    ``window``: how many recent errors rank the predictors; ``metric``: ``"mse"`` or
    ``"mae"``. Non-finite measurements are ignored. Ties go to the earlier predictor in the
    list (the default list starts with the cheapest, most reactive ones).

    Cost: every predictor and every error window is incremental (running sums, a sorted
    window for medians), and the winner is chosen once per update and cached, so
    ``update`` is O(number of predictors) and ``predict`` O(1) -- about 10 us for the
    default bank in CPython, whatever the windows.
    """

    def __init__(self, forecasters: Iterable[Forecaster] | None = None, window: int = 10,
                 metric: str = "mse"):
        if metric not in ("mse", "mae"):
            raise ValueError(f"metric must be 'mse' or 'mae', got {metric!r}")
        if window < 1:
            raise ValueError("window must be >= 1")
        self.forecasters = list(forecasters) if forecasters is not None \
            else default_forecasters()
        self.window, self.metric = window, metric
        self._err = [_WindowSum(window) for _ in self.forecasters]
        self._mse = metric == "mse"
        self.count = 0
        self.last = math.nan
        self._best = Forecast(math.nan, math.nan, "none")

    def update(self, value: float) -> None:
        """Score every predictor's standing forecast against ``value``, then feed it."""
        value = float(value)
        if not math.isfinite(value):
            return
        mse = self._mse
        best, best_err = None, math.inf
        for f, errs in zip(self.forecasters, self._err):
            guess = f.predict()
            if guess == guess and guess not in (math.inf, -math.inf):
                e = value - guess
                errs.append(e * e if mse else abs(e))
            f.update(value)
            if len(errs):
                s = errs.mean()
                if s < best_err * _TIE:  # a tie to rounding goes to the earlier one
                    best, best_err = f, s
        self.count += 1
        self.last = value
        if best is None:  # one value so far: nothing scored yet
            self._best = Forecast(value, math.nan, "last")
        else:
            err = math.sqrt(max(best_err, 0.0)) if mse else best_err
            self._best = Forecast(best.predict(), err, best.name)

    def errors(self) -> dict:
        """Windowed error of every predictor (RMSE or MAE; NaN before any score)."""
        return {f.name: self._score(errs) for f, errs in zip(self.forecasters, self._err)}

    def _score(self, errs) -> float:
        if not len(errs):
            return math.nan
        m = errs.mean()
        return math.sqrt(max(m, 0.0)) if self._mse else m

    def predict(self) -> Forecast:
        """The forecast of the predictor with the lowest recent error (cached: O(1))."""
        return self._best

    def __len__(self) -> int:
        return self.count


class LinkEstimate(NamedTuple):
    """Forecasts of a link's latency (s) and bandwidth (B/s)."""
    latency: Forecast
    bandwidth: Forecast

    def time(self, nbytes: float) -> float:
        """Predicted one-way time of ``nbytes`` (Hockney: latency + nbytes / bandwidth)."""
        bw = self.bandwidth.value
        per_byte = 0.0 if not (bw > 0) or math.isinf(bw) else 1.0 / bw
        return self.latency.value + nbytes * per_byte


class LinkForecast:
    """Latency and bandwidth forecasts of one link (two :class:`ForecasterBank`\\ s).

    Active probes call :meth:`update` or :meth:`update_fit`; a runtime that times its own
    messages can call :meth:`observe` (small messages feed the latency, large ones the
    bandwidth after subtracting the latency forecast).
    """

    def __init__(self, window: int = 10, metric: str = "mse", small: int = 1024):
        self.latency = ForecasterBank(window=window, metric=metric)
        self.bandwidth = ForecasterBank(window=window, metric=metric)
        self.small = small

    def update(self, latency: float | None = None, bandwidth: float | None = None) -> None:
        """Add a measured latency (s) and/or bandwidth (B/s)."""
        if latency is not None:
            self.latency.update(latency)
        if bandwidth is not None:
            self.bandwidth.update(bandwidth)

    def update_fit(self, fit) -> None:
        """Add a :class:`pyfw.monitor.stats.Hockney` fit (``alpha``, ``bandwidth``)."""
        self.update(fit.alpha, fit.bandwidth)

    def observe(self, nbytes: int, seconds: float) -> None:
        """Add the one-way time of a real message of ``nbytes``."""
        if nbytes <= self.small:
            self.latency.update(seconds)
            return
        lat = self.latency.predict().value
        rest = seconds - (lat if math.isfinite(lat) else 0.0)
        if rest > 0:
            self.bandwidth.update(nbytes / rest)

    def predict(self) -> LinkEstimate:
        """The link's forecast latency and bandwidth (see :meth:`time` for a message's time)."""
        return LinkEstimate(self.latency.predict(), self.bandwidth.predict())

    def time(self, nbytes: float) -> float:
        """Predicted one-way seconds for ``nbytes`` (NaN until a latency is known)."""
        return self.predict().time(nbytes)


class RankSpeedForecast:
    """Forecast of one rank's speed (work units per second)."""

    def __init__(self, window: int = 10, metric: str = "mse"):
        self.bank = ForecasterBank(window=window, metric=metric)

    def update(self, speed: float | None = None, *, work: float | None = None,
               seconds: float | None = None) -> None:
        """Add a speed, or ``work`` done in ``seconds`` (ignored when seconds <= 0)."""
        if speed is None:
            if work is None or seconds is None:
                raise TypeError("give speed, or work and seconds")
            if seconds <= 0:
                return
            speed = work / seconds
        self.bank.update(speed)

    def predict(self) -> Forecast:
        """Forecast speed of the rank."""
        return self.bank.predict()
