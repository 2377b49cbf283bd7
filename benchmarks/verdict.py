"""The run's verdict: every target a benchmark states, met or missed, and every wrong result.

A benchmark records each target it prints (`verdict.target(...)`) and each result that
failed its check against numpy (`verdict.wrong(...)`, or by raising WrongResult, which the
main job records for the section). Slow is not wrong: only wrong results make the main job
exit non-zero, so a missed target is reported, never hidden and never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class WrongResult(AssertionError):
    """A benchmarked result that differs from numpy's: the run's figures mean nothing."""


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """"1 case", "2 cases" (nouns: the plural when it is not noun + "s")."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


@dataclass(frozen=True)
class Target:
    """One stated target: `value` (in `unit`, shown with `digits` decimals) against `goal`.
    It is judged on the value as printed, so a line never reads "80.0% ... below 80%"."""

    name: str
    value: float
    goal: float
    unit: str = "%"
    at_most: bool = False       # True: the value must not exceed the goal (times, ratios)
    digits: int = 1

    @property
    def shown(self) -> float:
        return round(self.value, self.digits)

    @property
    def met(self) -> bool:
        return self.shown <= self.goal if self.at_most else self.shown >= self.goal

    def line(self) -> str:
        relation = "<=" if self.at_most else ">="
        return (f"{'met   ' if self.met else 'MISSED'} {self.name}: "
                f"{self.shown:.{self.digits}f}{self.unit} (target {relation} "
                f"{self.goal:g}{self.unit})")


@dataclass
class Verdict:
    """What one run stated and found; sections add to it as they run."""

    targets: list[Target] = field(default_factory=list)
    wrong_results: list[str] = field(default_factory=list)

    def target(self, name: str, value: float, goal: float, unit: str = "%",
               at_most: bool = False, digits: int = 1) -> Target:
        entry = Target(name, value, goal, unit, at_most, digits)
        self.targets.append(entry)
        return entry

    def wrong(self, what: str) -> None:
        self.wrong_results.append(what)

    @property
    def missed(self) -> list[Target]:
        return [t for t in self.targets if not t.met]

    def exit_code(self) -> int:
        """1 where a result was wrong, else 0 (missed targets included)."""
        return 1 if self.wrong_results else 0

    def lines(self) -> list[str]:
        met = len(self.targets) - len(self.missed)
        head = (f"{met} of {plural(len(self.targets), 'target')} met, "
                f"{len(self.missed)} missed; "
                + (f"{plural(len(self.wrong_results), 'WRONG result')} (exit status 1)"
                   if self.wrong_results else "every result checked against numpy is right"))
        return ([head] + [f"  {t.line()}" for t in self.targets]
                + [f"  WRONG  {what}" for what in self.wrong_results])
