"""MovieLens ratings: ``movielens_100k``, ``movielens_1m``, ``movielens_20m``, ``movielens_csv``.

Formats (each reads the directory holding the files)
    100k: ``u.data`` (tab: user, item, rating 1..5, ts), ``u.user`` (``id|age|gender|
    occupation|zip``), ``u.item`` (latin-1, ``|``: id, title, release date, video release
    date, url, 19 genre flags). 1M: ``ratings.dat``, ``users.dat``
    (``id::gender::age::occupation::zip``), ``movies.dat`` (latin-1, ``id::title::A|B``), all
    ``::``-separated. 20M: ``ratings.csv`` (header ``userId,movieId,rating,timestamp``,
    half-star ratings 0.5..5.0) and ``movies.csv`` (header, quoted titles); no demographics.
    ``movielens_csv`` is the same parser for the newer releases in that CSV layout: ml-25m,
    ml-32m, ml-latest and ml-latest-small (``ratings.csv`` + ``movies.csv``; their
    ``tags.csv`` and ``links.csv`` are not read).

Rules
    A timestamp before 1995 (when MovieLens ratings begin) is malformed: it is what a line
    cut short in its last field looks like. Given files with other names (``dataset.files``)
    are taken in the order ratings, users, items. Label = 1.0 if rating >= 4 else 0.0.
    Categorical: ``user_id``, ``item_id`` (int64 tokens), ``age``, ``gender``,
    ``occupation``, ``zip`` (string tokens, 100k/1M only), ``genre`` (first listed genre;
    ``unknown``/``(no genres listed)`` -> missing) and ``year`` (release year as a string
    token, from the release date (100k) or the ``(YYYY)`` suffix of the
    title; missing when absent). ``session`` = user id (int64), ``timestamp`` = rating time;
    rows sorted by (user, timestamp, item). ``user_side`` = user id + demographics.
    ``history_length`` > 0 adds ``hist_item_id`` (see [`workbench.data.formats.engine`][]).

Malformed rows
    As in [`workbench.data.formats.delimited`][]. Malformed rows of the side files (users, items)
    are reported the same way; they do not drop rating rows: ratings of a user or item without a
    valid side row get missing features.

These formats join several files, so they are parsed in memory (they do not stream).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from workbench.data.formats.delimited import Checks, PathsLike, as_paths, read_delimited
from workbench.data.formats.engine import (
    HIST_ITEM,
    check_history_length,
    history_column,
    int_column,
    sort_order,
    to_series,
    value_at,
)
from workbench.data.schema import LABEL, SESSION, TIMESTAMP, ParseReport, RawTable
from workbench.utils.errors import MissingInputError

__all__ = [
    "EXPECTS",
    "ML100K_GENRES",
    "MOVIELENS_FIRST_TIMESTAMP",
    "parse_movielens_100k",
    "parse_movielens_1m",
    "parse_movielens_20m",
]

ML100K_GENRES = [
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime",
    "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance",
    "Sci-Fi", "Thriller", "War", "Western",
]
_NO_GENRE = {"unknown", "(no genres listed)"}
#: 1995-01-01 UTC: MovieLens ratings begin in 1995; an earlier timestamp is a damaged line.
MOVIELENS_FIRST_TIMESTAMP = 788_918_400

#: What each format expects, in the words of the error a parse without good rows raises.
EXPECTS: dict[str, str] = {
    "movielens_100k": "a directory with u.data (user<TAB>item<TAB>rating<TAB>timestamp), u.user "
                      "and u.item",
    "movielens_1m": "a directory with ratings.dat (user::item::rating::timestamp), users.dat and "
                    "movies.dat",
    "movielens_20m": "a directory with ratings.csv (header userId,movieId,rating,timestamp) and "
                     "movies.csv",
    "movielens_csv": "a directory with ratings.csv (header userId,movieId,rating,timestamp) and "
                     "movies.csv (header movieId,title,genres), as in MovieLens 25M, 32M, "
                     "latest and latest-small",
}


def _rating_column(arr: pa.Array, checks: Checks, *, half_stars: bool) -> np.ndarray:
    """Validate MovieLens ratings (1..5 integers, or 0.5..5.0 in half steps) -> float64."""
    pattern = r"^[0-9](\.[05]0*)?$" if half_stars else r"^[1-5]$"
    ok = pc.match_substring_regex(arr, pattern)
    values = pc.cast(pc.if_else(ok, arr, pa.scalar(None, pa.string())), pa.float64())
    in_range = pc.and_(pc.greater_equal(values, 0.5 if half_stars else 1.0),
                       pc.less_equal(values, 5.0))
    bad = pc.and_(pc.invert(pc.fill_null(in_range, False)), pc.is_valid(arr))
    allowed = "0.5..5.0 in steps of 0.5" if half_stars else "1..5"
    checks.fail(pc.is_null(arr), "missing rating")
    checks.fail(bad, lambda i: f"rating {value_at(arr, i)!r} not in {allowed}")
    return values.fill_null(0.0).to_numpy(zero_copy_only=False)



def _resolve(paths: PathsLike, names: Sequence[str]) -> dict[str, Path]:
    """Find the named files in a directory (or among the given files); ``.gz`` also accepted."""
    given = as_paths(paths)
    found: dict[str, Path] = {}
    for name in names:
        for p in given:
            if p.is_dir():
                for cand in (p / name, p / f"{name}.gz"):
                    if cand.exists():
                        found[name] = cand
                        break
            elif p.name in (name, f"{name}.gz"):
                found[name] = p
            if name in found:
                break
    missing = [n for n in names if n not in found]
    spare = [p for p in given if p.is_file() and p not in found.values()]
    if missing and len(spare) == len(missing):  # renamed files, given in the names' order
        found.update(zip(missing, spare))
    elif missing:
        shown = ", ".join(p.name if p.is_file() else str(p) for p in given)
        raise MissingInputError(
            f"MovieLens needs {', '.join(names)}; {' and '.join(missing)} "
            f"({'; '.join(_HOLDS.get(n, n) for n in missing)}) "
            f"{'is' if len(missing) == 1 else 'are'} not among {shown}: add "
            f"{'it' if len(missing) == 1 else 'them'} to dataset.files (renamed files are "
            f"taken in the order {', '.join(names)})")
    return {n: found[n] for n in names}


#: What each MovieLens file holds (named when it is missing).
_HOLDS = {"u.data": "the ratings", "u.user": "the users' age, gender, occupation and zip code",
          "u.item": "the movies' titles and genres", "ratings.dat": "the ratings",
          "users.dat": "the users' gender, age, occupation and zip code",
          "movies.dat": "the movies' titles and genres", "ratings.csv": "the ratings",
          "movies.csv": "the movies' titles and genres"}


def _ratings_convert(*, half_stars: bool) -> Callable[[dict[str, pa.Array], Checks],
                                                     dict[str, Any]]:
    def convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
        out = {
            "user_id": int_column(cols["user_id"], "user_id", checks),
            "item_id": int_column(cols["item_id"], "item_id", checks),
            "rating": _rating_column(cols["rating"], checks, half_stars=half_stars),
            TIMESTAMP: int_column(cols[TIMESTAMP], TIMESTAMP, checks),
        }
        ts = out[TIMESTAMP]
        checks.fail(ts < MOVIELENS_FIRST_TIMESTAMP,
                    lambda i: f"timestamp {ts[i]} is before 1995, when MovieLens ratings begin "
                              "(a line cut short?)")
        return out
    return convert


def _users_convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
    out: dict[str, Any] = {"user_id": int_column(cols["user_id"], "user_id", checks)}
    for name in ("age", "gender", "occupation", "zip"):
        out[name] = cols[name]
    return out


def _year_from_title(titles: pd.Series) -> pd.Series:
    return titles.str.extract(r"\((\d{4})[^)]*\)\s*$", expand=False)


def _first_genre(genres: pd.Series) -> pd.Series:
    first = genres.str.split("|", n=1, regex=False).str[0]
    return first.where(~first.isin(list(_NO_GENRE)))


def _movielens(ratings: dict[str, Any], users: pd.DataFrame | None, items: pd.DataFrame,
               report: ParseReport, history_length: int) -> RawTable:
    """Join, label, sort and (optionally) add histories to parsed MovieLens tables.

    Args:
        ratings: columns user_id, item_id, rating, timestamp (numpy).
        users: user_id + demographic string columns, or None (20M).
        items: item_id, genre, year.
        report: the report so far (``rows`` is set here).
        history_length: see the module docstring.
    """
    user = ratings["user_id"]
    item = ratings["item_id"]
    ts = ratings[TIMESTAMP]
    order = sort_order(user, ts, item)
    user, item, ts = user[order], item[order], ts[order]
    frame = pd.DataFrame({
        LABEL: (ratings["rating"][order] >= 4.0).astype(np.float32),
        "user_id": user,
        "item_id": item,
    })
    user_feats: list[str] = []
    if users is not None:
        side = users.drop_duplicates("user_id").set_index("user_id")
        user_feats = [c for c in side.columns]
        joined = side.reindex(user)
        for c in user_feats:
            frame[c] = joined[c].array
    side_items = items.drop_duplicates("item_id").set_index("item_id").reindex(item)
    frame["genre"] = side_items["genre"].array
    frame["year"] = side_items["year"].array
    frame[SESSION] = user
    frame[TIMESTAMP] = ts
    sequences: dict[str, str] = {}
    if history_length > 0:
        frame[HIST_ITEM] = history_column(user, item, history_length).array
        sequences = {HIST_ITEM: "item_id"}
    report.rows = len(frame)
    return RawTable(frame, dense=[], categorical=["user_id", "item_id", *user_feats, "genre",
                                                  "year"],
                    user_side=["user_id", *user_feats], sequences=sequences, has_session=True,
                    has_timestamp=True, report=report)


def parse_movielens_100k(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                         history_length: int = 0) -> RawTable:
    """Parse MovieLens 100K (``u.data``, ``u.user``, ``u.item``).

    Args:
        paths: the directory holding the files (or the three files).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many ratings (the first of ``u.data``, before sorting).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.

    Returns:
        See the module docstring (label = rating >= 4; sorted by user, timestamp, item).
    """
    check_history_length(history_length)
    files = _resolve(paths, ["u.data", "u.user", "u.item"])
    report = ParseReport()
    ratings = read_delimited(files["u.data"], fields=["user_id", "item_id", "rating", TIMESTAMP],
                              sep="\t", convert=_ratings_convert(half_stars=False),
                              report=report, strict=strict, max_rows=max_rows)
    users = read_delimited(files["u.user"], fields=["user_id", "age", "gender", "occupation",
                                                     "zip"],
                            sep="|", convert=_users_convert, report=report, strict=strict,
                            encoding="latin-1")
    item_fields = ["item_id", "title", "release", "video_release", "url", *ML100K_GENRES]

    def items_convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
        out: dict[str, Any] = {"item_id": int_column(cols["item_id"], "item_id", checks),
                               "release": cols["release"]}
        flags = np.stack([int_column(cols[g], f"genre flag {g}", checks)
                          for g in ML100K_GENRES], axis=1) if len(cols["item_id"]) else \
            np.zeros((0, len(ML100K_GENRES)), dtype=np.int64)
        first = np.where((flags[:, 1:] != 0).any(axis=1), (flags[:, 1:] != 0).argmax(axis=1) + 1,
                         0)
        names = pa.array([None, *ML100K_GENRES[1:]], pa.string())
        out["genre"] = names.take(pa.array(first))
        return out

    items = read_delimited(files["u.item"], fields=item_fields, sep="|", convert=items_convert,
                            report=report, strict=strict, encoding="latin-1")
    item_frame = pd.DataFrame({
        "item_id": items["item_id"],
        "genre": to_series(items["genre"]),
        "year": to_series(items["release"]).str.extract(r"(\d{4})\s*$", expand=False),
    })
    user_frame = pd.DataFrame({k: to_series(v) for k, v in users.items()})
    return _movielens(ratings, user_frame, item_frame, report, history_length)


def parse_movielens_1m(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                       history_length: int = 0) -> RawTable:
    """Parse MovieLens 1M (``ratings.dat``, ``users.dat``, ``movies.dat``; ``::``-separated).

    Args:
        paths: the directory holding the files (or the three files).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many ratings (the first of ``ratings.dat``).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.

    Returns:
        See the module docstring (``age`` and ``occupation`` are the 1M codes, as tokens).
    """
    check_history_length(history_length)
    files = _resolve(paths, ["ratings.dat", "users.dat", "movies.dat"])
    report = ParseReport()
    ratings = read_delimited(files["ratings.dat"],
                              fields=["user_id", "item_id", "rating", TIMESTAMP], sep="::",
                              convert=_ratings_convert(half_stars=False), report=report,
                              strict=strict, max_rows=max_rows)
    users = read_delimited(files["users.dat"],
                            fields=["user_id", "gender", "age", "occupation", "zip"], sep="::",
                            convert=_users_convert, report=report, strict=strict,
                            encoding="latin-1")
    movies = read_delimited(files["movies.dat"], fields=["item_id", "title", "genres"],
                             sep="::", convert=_movies_convert, report=report, strict=strict,
                             encoding="latin-1")
    user_frame = pd.DataFrame({k: to_series(users[k]) for k in
                               ("user_id", "age", "gender", "occupation", "zip")})
    return _movielens(ratings, user_frame, _movie_frame(movies), report, history_length)


def _movies_convert(cols: dict[str, pa.Array], checks: Checks) -> dict[str, Any]:
    return {"item_id": int_column(cols["item_id"], "item_id", checks), "title": cols["title"],
            "genres": cols["genres"]}


def _movie_frame(movies: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame({
        "item_id": movies["item_id"],
        "genre": _first_genre(to_series(movies["genres"])),
        "year": _year_from_title(to_series(movies["title"])),
    })


def parse_movielens_20m(paths: PathsLike, *, strict: bool = False, max_rows: int | None = None,
                        history_length: int = 0) -> RawTable:
    """Parse MovieLens 20M (``ratings.csv``, ``movies.csv``; CSV with headers; no demographics).

    Also the parser of ``movielens_csv``: the newer releases in the same layout (ml-25m, ml-32m,
    ml-latest, ml-latest-small).

    Args:
        paths: the directory holding the files (or the two files).
        strict: raise [`MalformedInputError`][] at the first malformed row.
        max_rows: keep at most this many ratings (the first of ``ratings.csv``).
        history_length: add ``hist_item_id`` with up to this many previous items when > 0.

    Returns:
        See the module docstring (half-star ratings; label = rating >= 4.0).
    """
    check_history_length(history_length)
    files = _resolve(paths, ["ratings.csv", "movies.csv"])
    report = ParseReport()
    ratings = read_delimited(files["ratings.csv"],
                              fields=["user_id", "item_id", "rating", TIMESTAMP], sep=",",
                              header=["userId", "movieId", "rating", "timestamp"],
                              convert=_ratings_convert(half_stars=True), report=report,
                              strict=strict, max_rows=max_rows)
    movies = read_delimited(files["movies.csv"], fields=["item_id", "title", "genres"], sep=",",
                             header=["movieId", "title", "genres"], convert=_movies_convert,
                             report=report, strict=strict, quoted=True)
    return _movielens(ratings, None, _movie_frame(movies), report, history_length)
