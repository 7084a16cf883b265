"""A generated world for agent design studies: fictional entities, documents, ledger files, and
GAIA-like tasks at three levels whose gold answers are derived by code.

Nothing here exists outside this module, so no model can have memorised it, and the world is
the same for a seed on every machine (a seeded numpy Generator, sorted iteration). The world has
towns (two census records each), people (a birth town and year), and organisations sharing a
name word with one or two siblings (the Kestle Institute, the Kestle Archive), each with a
founder, a seat (some moved, so an older source is outdated), two or three director records from
different sources and years (they conflict; the question names which counts), and a ledger file
of quarterly revenue and staff. Documents state facts in varied sentences and shuffled order,
mention siblings and carry several years and numbers each, so copying a span of the right kind
from search results rarely gives the answer. Tasks:

- **L1**, one lookup: a founding year, a founder, a birth town, the director by the latest record,
  the latest census, the seat today;
- **L2**, two or three hops: the founder's birth town or year, the seat's population, the current
  director's birth town, years between two siblings' foundings, the founder's age at founding;
- **L3**, hops plus computation over a ledger file: a year's total revenue of the organisation a
  person founded, the mean staff of a year, the revenue change between years of the organisation a
  person now directs, the best quarter of a year.

Each prompt states the answer's format. :func:`read_facts` parses the documents' sentences back
into facts (the inverse of the writer); :func:`solve` is a scripted agent that answers every task
from tool observations alone, which shows that the evidence suffices. See design/world_benchmark.md.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from types import MappingProxyType

import numpy as np

__all__ = ["DEFAULT_WORLD_SEED", "LEVELS", "RELATION_SYNONYMS", "WORLD_BENCHMARK", "WORLD_SPLITS", "Fact", "World", "WorldTask",
           "generate_world", "read_facts", "solve", "world_tasks_of"]

WORLD_BENCHMARK = "generated-world"
DEFAULT_WORLD_SEED = 2026
LEVELS = ("L1", "L2", "L3")
WORLD_SPLITS = ("train", "dev", "test")
_SPLIT_SHARES = (0.25, 0.15, 0.60)
_LEDGER_YEARS = (2022, 2023)  # 8 rows and a header: a file fits the 12 lines agent memory shows
_QUARTERS = ("Q1", "Q2", "Q3", "Q4")
_SOURCES = ("annual report", "press release", "register of institutions", "staff newsletter")

# --- names -------------------------------------------------------------------------------------

_ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr", "kr",
           "st", "tr", "th", "sh", "ch", "fl", "pl")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei", "ou")
_CODAS = ("", "", "", "n", "r", "l", "s", "m", "nd", "rk", "st", "th")
_TOWN_ENDINGS = ("by", "ford", "holm", "stad", "wick", "mere", "vale", "port")
_KINDS = ("Institute", "Foundation", "Observatory", "Guild", "Archive", "Society", "Laboratory", "Academy")
_PROFESSIONS = ("chemist", "engineer", "historian", "surveyor", "physician", "architect", "economist",
                "botanist", "geologist", "librarian")


def _word(rng: np.random.Generator, syllables: int) -> str:
    parts = [_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))]
             + _CODAS[rng.integers(len(_CODAS))] for _ in range(syllables)]
    return "".join(parts).capitalize()


def _unique(rng: np.random.Generator, n: int, make: Callable[[], str], taken: set[str]) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        name = make()
        if name not in taken and 4 <= len(name) <= 14:
            taken.add(name)
            out.append(name)
    return out


# --- the world ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Town:
    name: str
    censuses: tuple[tuple[int, int], ...]  # (year, population), oldest first

    @property
    def population(self) -> int:
        return self.censuses[-1][1]


@dataclass(frozen=True, slots=True)
class Person:
    name: str
    birth_town: str
    birth_year: int
    profession: str
    home_town: str                                # where the person later lived (a distractor)


@dataclass(frozen=True, slots=True)
class Organisation:
    name: str                                     # "Kestle Institute" (documents write "the Kestle Institute")
    founded: int
    founder: str
    seats: tuple[tuple[int, str], ...]            # (from year, town), oldest first
    directors: tuple[tuple[int, str, str], ...]   # (year, source, person), oldest first
    ledger: str                                   # the ledger's file name
    rows: tuple[tuple[int, str, int, int], ...]   # (year, quarter, revenue, staff)
    opened: int                                   # the year its present building opened (a distractor)
    charter: int                                  # the year its charter was last revised (a distractor)

    @property
    def seat(self) -> str:
        return self.seats[-1][1]

    @property
    def director(self) -> str:
        return self.directors[-1][2]


@dataclass(frozen=True, slots=True)
class World:
    """The generated world: its entities, its documents (id -> text) and its files (name -> CSV)."""

    seed: int
    towns: Mapping[str, Town]
    people: Mapping[str, Person]
    organisations: Mapping[str, Organisation]
    documents: Mapping[str, str]
    files: Mapping[str, str]

    def siblings(self, org: str) -> tuple[str, ...]:
        return _siblings(self.organisations, org)


def _siblings(names, org: str) -> tuple[str, ...]:
    """The organisations sharing ``org``'s name word."""
    return tuple(o for o in names if o != org and o.split()[0] == org.split()[0])


@dataclass(frozen=True, slots=True)
class WorldTask:
    """One task: its prompt (with the answer's format), the gold answer derived by code, its level
    and template, the split, and the plan of hops :func:`solve` follows (``plan``: the template's
    arguments, entity names and years)."""

    task_id: str
    level: str
    template: str
    split: str
    question: str
    answer: str
    answer_kind: str                   # year | person | town | integer | decimal | quarter
    plan: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", MappingProxyType(dict(self.plan)))


def _towns(rng: np.random.Generator, n: int, taken: set[str]) -> dict[str, Town]:
    names = _unique(rng, n, lambda: _word(rng, 2) + _TOWN_ENDINGS[rng.integers(len(_TOWN_ENDINGS))], taken)
    towns = {}
    for name in names:
        first = int(rng.integers(2004, 2014))
        base = int(rng.integers(6_000, 400_000))
        later = int(base * rng.uniform(0.85, 1.3))
        towns[name] = Town(name, ((first, base), (first + int(rng.integers(5, 11)), later)))
    return towns


def _people(rng: np.random.Generator, n: int, towns: Sequence[str], taken: set[str]) -> dict[str, Person]:
    given = _unique(rng, 70, lambda: _word(rng, int(rng.integers(1, 3))), taken)
    surnames = _unique(rng, n // 2, lambda: _word(rng, 2), taken)
    people: dict[str, Person] = {}
    while len(people) < n:  # a surname is shared by two people on average: names do not give a person away
        name = f"{given[rng.integers(len(given))]} {surnames[rng.integers(len(surnames))]}"
        birth, home = (towns[i] for i in rng.choice(len(towns), size=2, replace=False))
        if name not in people:
            people[name] = Person(name, birth, int(rng.integers(1890, 1990)),
                                  _PROFESSIONS[rng.integers(len(_PROFESSIONS))], home)
    return people


def _ledger_rows(rng: np.random.Generator) -> tuple[tuple[int, str, int, int], ...]:
    # Revenue varies around a level, not as a random walk, whose peak would sit at an end of the
    # ledger far more often than chance (so copying the first or last row would find it).
    level, staff = float(rng.integers(200, 9_000)) * 100, int(rng.integers(12, 400))
    rows = []
    for year in _LEDGER_YEARS:
        for quarter in _QUARTERS:
            staff = max(5, staff + int(rng.integers(-12, 15)))
            rows.append((year, quarter, int(round(level * rng.uniform(0.7, 1.3), -1)), staff))
    return tuple(rows)


def _organisations(rng: np.random.Generator, n: int, people: Mapping[str, Person], towns: Sequence[str],
                   taken: set[str]) -> dict[str, Organisation]:
    words = _unique(rng, n // 2, lambda: _word(rng, 2), taken)
    names: list[str] = []
    for word in words:  # every name word is shared by two or three organisations
        kinds = rng.permutation(len(_KINDS))[: int(rng.integers(2, 4))]
        names.extend(f"{word} {_KINDS[k]}" for k in sorted(kinds))
    names = names[:n]
    # Each person has at most one role in all organisations, so "the organisation X founded" is one.
    free = [people[p] for p in rng.permutation(sorted(people))]
    ledgers = rng.choice(np.arange(1000, 10000), size=len(names), replace=False)
    orgs = {}
    for name, ledger in zip(names, ledgers):
        founder = free.pop()
        founded = min(2008, founder.birth_year + int(rng.integers(25, 50)))
        seats = [(founded + int(rng.integers(1, 7)), towns[rng.integers(len(towns))])]
        if rng.random() < 0.5:
            moved_to = towns[rng.integers(len(towns))]
            if moved_to != seats[0][1]:
                seats.append((int(rng.integers(seats[0][0] + 3, 2021)), moved_to))
        years = sorted(int(y) for y in rng.choice(np.arange(max(founded + 1, 1990), 2025),
                                                  size=int(rng.integers(2, 4)), replace=False))
        directors = tuple((y, _SOURCES[rng.integers(len(_SOURCES))], free.pop().name) for y in years)
        orgs[name] = Organisation(name, founded, founder.name, tuple(seats), directors, f"ledger-{ledger}.csv",
                                  _ledger_rows(rng), int(rng.integers(founded + 1, 2024)),
                                  int(rng.integers(founded + 1, 2024)))
    return orgs


def _ledger_csv(org: Organisation) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(("year", "quarter", "revenue_credits", "staff"))
    writer.writerows(org.rows)
    return out.getvalue()


# --- documents: every fact sentence has a few wordings, each with its parser --------------------

_N = r"[A-Z][a-z]+"
_ORG = rf"{_N} (?:{'|'.join(_KINDS)})"
_PERSON = rf"{_N} {_N}"
_YEAR = r"\d{4}"
_NUM = r"\d[\d,]*"

#: relation -> wordings; ``{x}`` fields are filled by the writer and matched by the parser.
_WORDINGS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "founded": ("The {org} was founded in {year} by {person}.",
                "{person} established the {org} in {year}.",
                "In {year}, {person} founded the {org}."),
    "seat": ("The {org} has been based in {town} since {year}.",
             "From {year} the {org} had its seat in {town}."),
    "move": ("In {year} the {org} moved to {town}.",
             "The {org} moved its seat to {town} in {year}."),
    "director": ("The {source} of the {org} for {year} names {person} as its director.",
                 "In {year}, the {source} gave {person} as director of the {org}.",
                 "{person} is listed as director of the {org} in the {source} of {year}."),
    "ledger": ("The quarterly accounts of the {org} are kept in the file {file}.",
               "Accounts of the {org}, quarter by quarter, are in {file}."),
    "opened": ("The present building of the {org} opened in {year}.",),
    "charter": ("The charter of the {org} was last revised in {year}.",),
    "sibling": ("The {org} is not to be confused with the {other}, which {person} founded.",),
    "born": ("{person} was born in {town} in {year} and trained as {profession}.",
             "Born in {year} in {town}, {person} worked as {profession}.",
             "{person}, {profession}, was born in {year} in {town}."),
    "role": ("{person} is remembered as the one who {role} the {org}.",
             "Later in life {person} {role} the {org}."),
    "lived": ("{person} later settled in {town}.",
              "For most of a working life {person} lived in {town}."),
    "census": ("The census of {year} counted {number} residents in {town}.",
               "In {year}, {town} had {number} inhabitants by census.",
               "{town} recorded {number} residents at the {year} census."),
})
_FIELDS = {"org": _ORG, "other": _ORG, "person": _PERSON, "year": _YEAR, "town": _N, "number": _NUM,
           "file": r"ledger-\d{4}\.csv", "source": r"[a-z][a-z ]+?", "profession": r"an? [a-z]+",
           "role": r"founded|directed"}


def _pattern(wording: str) -> re.Pattern[str]:
    text = re.escape(wording)
    for name, rx in _FIELDS.items():
        text = text.replace(re.escape("{" + name + "}"), f"(?P<{name}>{rx})")
    return re.compile(text)


_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (relation, _pattern(w)) for relation, wordings in _WORDINGS.items() for w in wordings)


@dataclass(frozen=True, slots=True)
class Fact:
    """One sentence read back: its relation and fields (``org``, ``person``, ``year``, ...)."""

    relation: str
    fields: Mapping[str, str]

    def __getitem__(self, name: str) -> str:
        return self.fields[name]

    def get(self, name: str, default: str | None = None) -> str | None:
        return self.fields.get(name, default)


def read_facts(text: str) -> list[Fact]:
    """Every fact sentence in ``text`` (e.g. a search observation), in order of appearance."""
    found = []
    for relation, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            found.append((m.start(), Fact(relation, MappingProxyType(m.groupdict()))))
    return [f for _, f in sorted(found, key=lambda e: e[0])]


def _say(rng: np.random.Generator, relation: str, **fields: object) -> str:
    wordings = _WORDINGS[relation]
    return wordings[rng.integers(len(wordings))].format(**fields)


def _shuffled(rng: np.random.Generator, sentences: Sequence[str]) -> str:
    return " ".join(sentences[i] for i in rng.permutation(len(sentences)))


def _documents(rng: np.random.Generator, towns: Mapping[str, Town], people: Mapping[str, Person],
               orgs: Mapping[str, Organisation], siblings: Callable[[str], tuple[str, ...]]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for name, org in orgs.items():
        profile = [_say(rng, "founded", org=name, year=org.founded, person=org.founder),
                   _say(rng, "seat", org=name, town=org.seats[0][1], year=org.seats[0][0]),
                   _say(rng, "ledger", org=name, file=org.ledger),
                   _say(rng, "opened", org=name, year=org.opened),
                   _say(rng, "charter", org=name, year=org.charter)]
        profile += [_say(rng, "sibling", org=name, other=s, person=orgs[s].founder) for s in siblings(name)]
        docs[f"profile-{org.ledger[7:11]}"] = _shuffled(rng, profile)
        for year, town in org.seats[1:]:  # a move is news of its own: the profile stays outdated
            docs[f"news-{org.ledger[7:11]}-{year}"] = _say(rng, "move", org=name, town=town, year=year)
        for year, source, person in org.directors:  # conflicting records, one source each
            docs[f"record-{org.ledger[7:11]}-{year}"] = _say(rng, "director", org=name, year=year, source=source,
                                                             person=person)
    roles = {o.founder: ("founded", name) for name, o in orgs.items()}
    roles.update({d: ("directed", name) for name, o in orgs.items() for _, _, d in o.directors})
    for i, person in enumerate(people.values()):
        article = "an" if person.profession[0] in "aeiou" else "a"
        bio = [_say(rng, "born", person=person.name, town=person.birth_town, year=person.birth_year,
                    profession=f"{article} {person.profession}"),
               _say(rng, "lived", person=person.name, town=person.home_town)]
        if person.name in roles:  # a bio names the person's one role, without its year
            role, org = roles[person.name]
            bio.append(_say(rng, "role", person=person.name, role=role, org=org))
        docs[f"bio-{i:04d}"] = _shuffled(rng, bio)
    for i, town in enumerate(towns.values()):
        docs[f"gazetteer-{i:03d}"] = _shuffled(rng, [_say(rng, "census", town=town.name, year=y, number=f"{p:,}")
                                                     for y, p in town.censuses])
    return docs


# --- tasks -------------------------------------------------------------------------------------

#: The documents' words for one relation, each with the others: the EXPAND step's synonyms.
RELATION_SYNONYMS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "founded": ("established",), "established": ("founded",), "founder": ("founded", "established"),
    "director": ("directed",), "directs": ("director",), "directed": ("director",),
    "based": ("seat", "moved"), "seat": ("based", "moved"),
    "population": ("residents", "inhabitants"), "residents": ("inhabitants",), "inhabitants": ("residents",),
    "revenue": ("accounts",), "staff": ("accounts",), "born": ("birth",),
})

_FORMAT = {"year": "Answer with the year only.", "person": "Answer with the person's full name.",
           "town": "Answer with the town's name only.", "integer": "Answer with a whole number.",
           "decimal": "Answer with a number rounded to one decimal place.",
           "quarter": "Answer with the year and the quarter, as in 2020 Q1."}
_LATEST = "according to the most recent record"


def _one_decimal(value: float) -> str | None:
    """``value`` rounded half-up to one decimal, or None where Python's ``round`` would disagree
    (a value on the rounding boundary has no single gold an agent's code would reach)."""
    half_up = Decimal(repr(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return str(half_up) if float(half_up) == round(value, 1) else None


def _year_rows(org: Organisation, year: int) -> list[tuple[int, str, int, int]]:
    return [r for r in org.rows if r[0] == year]


def _candidates(world: World) -> dict[str, list[tuple[str, str, str, dict[str, object]]]]:
    """Every task the world supports, by template: (question, answer, kind, plan)."""
    orgs, people, towns = world.organisations, world.people, world.towns
    the = {name: f"the {name}" for name in orgs}
    out: dict[str, list] = {}

    def add(template: str, question: str, answer: object, kind: str, **plan: object) -> None:
        out.setdefault(template, []).append((f"{question} {_FORMAT[kind]}", str(answer), kind, plan))

    for name, o in orgs.items():
        add("founded_year", f"In what year was {the[name]} founded?", o.founded, "year", org=name)
        add("founder", f"Who founded {the[name]}?", o.founder, "person", org=name)
        add("current_director", f"Who is the director of {the[name]} {_LATEST}?", o.director, "person", org=name)
        if len(o.seats) > 1:
            add("current_seat", f"In which town is {the[name]} based today?", o.seat, "town", org=name)
        founder = people[o.founder]
        add("founder_birth_town", f"In which town was the founder of {the[name]} born?", founder.birth_town, "town",
            org=name)
        add("founder_age", f"How old was the founder of {the[name]} in the year it was founded (the difference of "
            "the two years)?", o.founded - founder.birth_year, "integer", org=name)
        add("seat_population", f"What was the population of the town where {the[name]} is based today, at that "
            "town's most recent census?", towns[o.seat].population, "integer", org=name)
        add("director_birth_town", f"In which town was the person who directs {the[name]} {_LATEST} born?",
            people[o.director].birth_town, "town", org=name)
        for other in world.siblings(name):
            gap = orgs[other].founded - o.founded
            if gap > 0:
                add("founding_gap", f"How many years after {the[name]} was {the[other]} founded?", gap, "integer",
                    org=name, other=other)
        for year in _LEDGER_YEARS:
            rows = _year_rows(o, year)
            add("revenue_total", f"What was the total revenue, in credits, in {year} of the organisation founded by "
                f"{o.founder}?", sum(r[2] for r in rows), "integer", person=o.founder, year=year)
            mean = _one_decimal(sum(r[3] for r in rows) / 4)
            if mean is not None:
                add("staff_mean", f"What was the mean staff count over the four quarters of {year} at {the[name]}?",
                    mean, "decimal", org=name, year=year)
        best = sorted(o.rows, key=lambda r: -r[2])
        if best[0][2] != best[1][2]:
            add("best_quarter", f"In which quarter did {the[name]} earn the most revenue, of all the quarters its "
                "accounts cover?", f"{best[0][0]} {best[0][1]}", "quarter", org=name)
        for y1, y2 in zip(_LEDGER_YEARS, _LEDGER_YEARS[1:]):
            r1, r2 = (sum(r[2] for r in _year_rows(o, y)) for y in (y1, y2))
            change = _one_decimal(100 * (r2 - r1) / r1)
            if change is not None:
                add("revenue_change", f"By what percentage did the annual revenue of the organisation directed by "
                    f"{o.director} ({_LATEST}) change from {y1} to {y2}? A fall is negative; give the number without "
                    "the % sign.", change, "decimal", person=o.director, y1=y1, y2=y2)
    for person in people.values():
        add("birth_town", f"In which town was {person.name} born?", person.birth_town, "town", person=person.name)
    for town in towns.values():
        add("latest_population", f"What was the population of {town.name} at its most recent census?",
            town.population, "integer", town=town.name)
    return out


#: The templates of each level.
TEMPLATES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "L1": ("founded_year", "founder", "birth_town", "current_director", "latest_population", "current_seat"),
    "L2": ("founder_birth_town", "founder_age", "seat_population", "director_birth_town", "founding_gap"),
    "L3": ("revenue_total", "staff_mean", "revenue_change", "best_quarter"),
})
_TASKS_PER_LEVEL = 200


def world_tasks_of(world: World) -> list[WorldTask]:
    """The world's tasks: ``_TASKS_PER_LEVEL`` per level spread evenly over the level's templates
    (seeded draws, no entity twice in a template), each template's draws split train/dev/test
    by ``_SPLIT_SHARES``."""
    rng = np.random.default_rng([world.seed, 1])
    candidates = _candidates(world)
    tasks = []
    for level, templates in TEMPLATES.items():
        quota = [_TASKS_PER_LEVEL // len(templates) + (i < _TASKS_PER_LEVEL % len(templates))
                 for i in range(len(templates))]
        for template, n in zip(templates, quota):
            pool = candidates[template]
            if len(pool) < n:
                raise ValueError(f"the world of seed {world.seed} holds {len(pool)} {template} tasks, {n} wanted")
            picked = [pool[i] for i in rng.permutation(len(pool))[:n]]
            cuts = np.cumsum([round(share * n) for share in _SPLIT_SHARES[:-1]])
            for i, (question, answer, kind, plan) in enumerate(picked):
                split = WORLD_SPLITS[int(np.searchsorted(cuts, i, side="right"))]
                tasks.append(WorldTask(f"{level}-{template}-{i:03d}", level, template, split, question, answer, kind,
                                       plan))
    return tasks


@functools.cache
def generate_world(seed: int = DEFAULT_WORLD_SEED) -> World:
    """The world of ``seed`` (cached: the same object for the same seed)."""
    rng = np.random.default_rng(seed)
    taken: set[str] = set()
    towns = _towns(rng, 60, taken)
    people = _people(rng, 480, sorted(towns), taken)
    orgs = _organisations(rng, 120, people, sorted(towns), taken)

    docs = _documents(rng, towns, people, orgs, lambda name: _siblings(orgs, name))
    files = {o.ledger: _ledger_csv(o) for o in orgs.values()}
    return World(seed, MappingProxyType(towns), MappingProxyType(people), MappingProxyType(orgs),
                 MappingProxyType(docs), MappingProxyType(files))


# --- the scripted reader: answers every task from tool observations only ------------------------

Call = Callable[[str, Mapping[str, str]], str]


class _Reader:
    def __init__(self, call: Call) -> None:
        self.call = call

    def facts(self, query: str, relation: str, required: bool = True, **match: str) -> list[Fact]:
        found = [f for f in read_facts(self.call("search", {"query": query}))
                 if f.relation == relation and all(f.get(k) == v for k, v in match.items())]
        if required and not found:
            raise LookupError(f"no {relation} fact for {match} in the results of {query!r}")
        return found

    def latest(self, query: str, relation: str, **match: str) -> Fact:
        return max(self.facts(query, relation, **match), key=lambda f: int(f["year"]))

    def founded(self, org: str) -> Fact:
        return self.facts(f"{org} founded", "founded", org=org)[0]

    def director(self, org: str) -> str:
        # Records come from several sources; one query's top results can miss one, so ask per source.
        queries = [f"director of the {org}"] + [f"{org} director {source}" for source in _SOURCES]
        found = [f for q in queries for f in self.facts(q, "director", required=False, org=org)]
        if not found:
            raise LookupError(f"no director record of the {org} found")
        return max(found, key=lambda f: int(f["year"]))["person"]

    def seat(self, org: str) -> str:
        # The profile gives the first seat, news a later move: the latest dated statement counts.
        found = (self.facts(f"{org} moved", "move", required=False, org=org)
                 + self.facts(f"{org} based since seat", "seat", required=False, org=org))
        if not found:
            raise LookupError(f"no seat of the {org} found")
        return max(found, key=lambda f: int(f["year"]))["town"]

    def born(self, person: str) -> Fact:
        return self.facts(f"{person} born", "born", person=person)[0]

    def population(self, town: str) -> int:
        return int(self.latest(f"{town} census residents", "census", town=town)["number"].replace(",", ""))

    def ledger(self, org: str) -> list[dict[str, str]]:
        name = self.facts(f"{org} quarterly accounts file", "ledger", org=org)[0]["file"]
        return list(csv.DictReader(io.StringIO(self.call("read_file", {"name": name}))))


def _year(rows: list[dict[str, str]], year: object, column: str) -> list[int]:
    return [int(r[column]) for r in rows if r["year"] == str(year)]


def solve(task: WorldTask, call: Call) -> str:
    """Answer ``task`` as a careful reader would: search for each hop, read the sentence that states
    it (the most recent record where sources conflict), read the ledger file, compute. ``call(tool,
    arguments)`` runs the task's tools (``search`` with ``query``, ``read_file`` with ``name``)."""
    r, p, t = _Reader(call), task.plan, task.template
    if t == "founded_year":
        return r.founded(p["org"])["year"]
    if t == "founder":
        return r.founded(p["org"])["person"]
    if t == "current_director":
        return r.director(p["org"])
    if t == "current_seat":
        return r.seat(p["org"])
    if t == "birth_town":
        return r.born(p["person"])["town"]
    if t == "latest_population":
        return str(r.population(p["town"]))
    if t == "founder_birth_town":
        return r.born(r.founded(p["org"])["person"])["town"]
    if t == "founder_age":
        founded = r.founded(p["org"])
        return str(int(founded["year"]) - int(r.born(founded["person"])["year"]))
    if t == "seat_population":
        return str(r.population(r.seat(p["org"])))
    if t == "director_birth_town":
        return r.born(r.director(p["org"]))["town"]
    if t == "founding_gap":
        return str(int(r.founded(p["other"])["year"]) - int(r.founded(p["org"])["year"]))
    if t == "revenue_total":
        org = r.facts(f"{p['person']} founded", "role", person=p["person"], role="founded")[0]["org"]
        return str(sum(_year(r.ledger(org), p["year"], "revenue_credits")))
    if t == "staff_mean":
        return _one_decimal(sum(_year(r.ledger(p["org"]), p["year"], "staff")) / 4) or ""
    if t == "best_quarter":
        best = max(r.ledger(p["org"]), key=lambda row: int(row["revenue_credits"]))
        return f"{best['year']} {best['quarter']}"
    if t == "revenue_change":
        org = r.facts(f"{p['person']} directed", "role", person=p["person"], role="directed")[0]["org"]
        rows = r.ledger(org)
        r1, r2 = (sum(_year(rows, y, "revenue_credits")) for y in (p["y1"], p["y2"]))
        return _one_decimal(100 * (r2 - r1) / r1) or ""
    raise ValueError(f"unknown template {t!r}")
