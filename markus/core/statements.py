"""A model's hot statements, made once per database connection: its table and column
names quoted for the connection, the converters the ORM would apply to a row it reads
(so a row becomes a model instance without the ORM building a query), and its INSERT of
new instances, prepared as ``Model.save`` prepares them. The mailbox's statements
(``mailbox.statements``) are made this way; so are the rows the attention loop writes for
every item (``attention.records``: decisions, activities, their logs, the main session's
lines; the item's LLM session, ``attention.session``; a working-memory entry,
``markus.agents.memory``), where building each statement with the ORM cost more than the
database spent on it.

Only for models whose saves nothing else listens to: an INSERT made here sends no
``pre_save`` / ``post_save`` signal and calls no ``save()`` of the model's own.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from .db import make_prepared_cursor

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]
Converters = list[tuple[int, list[tuple[Converter, Any]]]]

# The field classes (exactly these, not subclasses, which may prepare values their own
# way) whose database value is the Python value itself when the value is of this type
# (``get_db_prep_save`` returns it unchanged), or None (except a boolean's).
_AS_IS: dict[type[Any], tuple[type[Any], ...]] = {
    **{kind: (str, type(None)) for kind in (models.CharField, models.TextField, models.SlugField)},
    **{
        kind: (int, type(None))
        for kind in (
            models.IntegerField,
            models.BigIntegerField,
            models.SmallIntegerField,
            models.PositiveIntegerField,
            models.PositiveSmallIntegerField,
            models.PositiveBigIntegerField,
            models.AutoField,
            models.BigAutoField,
            models.SmallAutoField,
        )
    },
    models.BooleanField: (bool,),
    models.FloatField: (float, type(None)),
}


def as_is_types(f: Any, conn: BaseDatabaseWrapper) -> tuple[type[Any], ...]:
    """The types of value that field ``f`` (a relation: its target's) stores unchanged
    (``_AS_IS``); () when each value goes through the field's ``get_db_prep_save``."""
    if f.is_relation:
        # A relation stores "" as NULL where the database reads empty strings so.
        if not (f.many_to_one or f.one_to_one) or conn.features.interprets_empty_strings_as_nulls:
            return ()
        f = f.target_field
    kinds = _AS_IS.get(type(f), ())
    if int in kinds and type(conn.ops).adapt_integerfield_value is not BaseDatabaseOperations.adapt_integerfield_value:
        return ()  # the backend wraps an integer in a type of its size (psycopg 3)
    return kinds


class KeptCursor:
    """One cursor of a connection, made by ``make(conn)`` and kept while the connection
    and the query logging mode stay the same (a new connection, or a test capturing
    queries, gets a new one). Statements run on it are read to the end, so none stays
    open; it is never closed by its users."""

    def __init__(self, conn: BaseDatabaseWrapper, make: Callable[[BaseDatabaseWrapper], Any]) -> None:
        self.conn = conn
        self._make = make
        self._cursor: Any = None
        self._raw: Any = None
        self._logged = False

    def get(self) -> Any:
        conn = self.conn
        logged = conn.queries_logged
        raw = conn.connection
        if self._cursor is None or raw is None or raw is not self._raw or logged != self._logged:
            self._cursor = self._make(conn)
            self._raw, self._logged = conn.connection, logged
        return self._cursor


class TableStatements(Generic[M]):
    """The statements of one model on one database connection, made once."""

    def __init__(self, conn: BaseDatabaseWrapper, model: type[M]) -> None:
        qn = conn.ops.quote_name
        self.conn = conn
        self.model = model
        self.utc_text = conn.vendor == "sqlite" and settings.USE_TZ and conn.timezone is UTC
        self._kept = KeptCursor(conn, BaseDatabaseWrapper.cursor)
        meta = model._meta
        self.fields = tuple(meta.concrete_fields)
        self.attnames = tuple(f.attname for f in self.fields)
        self.table = qn(meta.db_table)
        self.columns = ", ".join(qn(f.column) for f in self.fields)
        self.converters = self._converters(self.fields)
        # A new row: every column but the database's own (an auto-increment key), which
        # the INSERT returns, as ``Model.save`` does.
        self.returned = tuple(meta.db_returning_fields)
        self.written = tuple(f for f in self.fields if f not in self.returned)
        self._inserts: dict[int, str] = {}
        self._updates: dict[tuple[str, ...], str] = {}
        self.field = {f.attname: f for f in self.fields} | {f.name: f for f in self.fields}
        # The fields whose values of these types are stored as they are (``prep``).
        self.as_is = {f: as_is_types(f, conn) for f in self.fields}
        # A row becomes an instance as ``Model.from_db`` makes one, without ``__init__``
        # (it walks every field, most of the time of a read of few columns), unless the
        # model changes either or something listens to its init signals (``item``).
        self.plain_init = model.__init__ is Model.__init__ and model.from_db.__func__ is Model.from_db.__func__  # type: ignore[attr-defined]

    def _converters(self, fields: Sequence[Any]) -> Converters:
        """The converters the ORM would apply to a row of these fields, by position."""
        conn, made = self.conn, []
        for i, f in enumerate(fields):
            col = f.get_col(f.model._meta.db_table)
            found = [*conn.ops.get_db_converters(col), *col.get_db_converters(conn)]
            if found:
                made.append((i, [(fn, col) for fn in found]))
        return made

    def stamp(self, value: datetime) -> Any:
        """A datetime as the database stores it (``adapt_datetimefield_value``, with a
        shortcut for the usual case: an aware UTC time and a connection in UTC)."""
        if self.utc_text and value.tzinfo is UTC:
            return str(value.replace(tzinfo=None))
        return self.conn.ops.adapt_datetimefield_value(value)

    def prep(self, f: Any, value: Any) -> Any:
        """A value as ``f.get_db_prep_save`` stores it: a string, number or None of a
        field that stores them unchanged as it is, a datetime by ``stamp``."""
        if type(value) in self.as_is.get(f, ()):
            return value
        if isinstance(value, datetime):
            return self.stamp(value)
        return f.get_db_prep_save(value, self.conn)

    def cursor(self) -> Any:
        """This connection's cursor, kept (``KeptCursor``)."""
        return self._kept.get()

    def convert(self, values: Sequence[Any], converters: Converters) -> list[Any]:
        row = list(values)
        conn = self.conn
        for i, found in converters:
            value = row[i]
            for fn, col in found:
                value = fn(value, col, conn)
            row[i] = value
        return row

    def _init_free(self) -> bool:
        """May an instance be made without the model's ``__init__`` (``item``, ``new``)?
        Not when the model changes ``__init__`` or ``from_db``, nor while something
        listens to its init signals (asked each time: a receiver may connect later)."""
        model = self.model
        return self.plain_init and not (pre_init.has_listeners(model) or post_init.has_listeners(model))

    def item(self, values: Sequence[Any]) -> M:
        """The model instance of a row of ``columns``, converted as the ORM converts:
        made as ``Model.from_db`` makes it, its fields set directly (not through
        ``__init__``) unless something listens to the model's init signals."""
        model = self.model
        row = self.convert(values, self.converters)
        if not self._init_free():
            return model.from_db(self.conn.alias, self.attnames, row)
        obj = model.__new__(model)
        obj.__dict__.update(zip(self.attnames, row, strict=True))
        state = obj._state = ModelState()
        state.adding, state.db = False, self.conn.alias
        return obj

    def new(self, **values: Any) -> M:
        """A new instance, as ``Model(**values)`` makes it (each field given by its
        name or attname, or its default; a related instance set through its descriptor,
        cached as the model's ``__init__`` caches it), without walking the model's
        ``__init__``: the rows the loop writes for every item are made this way. A model
        with an init signal receiver, or a value that is not a field, goes through
        ``__init__``."""
        model = self.model
        if not self._init_free():
            return model(**values)
        obj = model.__new__(model)
        obj._state = ModelState()
        put, given = obj.__dict__, 0
        for f in self.fields:
            name = f.attname
            if name in values:
                put[name] = values[name]
                given += 1
            elif f.name in values:
                setattr(obj, f.name, values[f.name])  # the relation's descriptor: its id and the instance
                given += 1
            else:
                put[name] = f.get_default()
        if given != len(values):  # a property, or a name that is no field: the model's own way
            return model(**values)
        return obj

    def insert_sql(self, rows: int) -> str:
        """The INSERT of ``rows`` new rows (made once for each number of rows)."""
        try:
            return self._inserts[rows]
        except KeyError:
            pass
        qn = self.conn.ops.quote_name
        one = f"({', '.join(['%s'] * len(self.written))})"
        sql = f"INSERT INTO {self.table} ({', '.join(qn(f.column) for f in self.written)}) VALUES "
        sql += ", ".join([one] * rows)
        if self.returned:
            sql += f" RETURNING {', '.join(qn(f.column) for f in self.returned)}"
        made = self._inserts[rows] = sql
        return made

    def save_new(self, objs: Sequence[M]) -> None:
        """INSERT new instances in one statement, their values prepared as
        ``Model.save`` prepares them (each field's ``pre_save``, then its database
        value); the database's own columns (an auto-increment key) set on them from the
        RETURNING, and each marked as stored."""
        if not objs:
            return
        written, prep = self.written, self.prep
        params = [prep(f, f.pre_save(obj, True)) for obj in objs for f in written]
        cursor = self.cursor()
        cursor.execute(self.insert_sql(len(objs)), params)
        if self.returned:
            for obj, row in zip(objs, cursor.fetchall(), strict=True):
                for f, value in zip(self.returned, row, strict=True):
                    setattr(obj, f.attname, value)
        alias = self.conn.alias
        for obj in objs:
            obj._state.adding, obj._state.db = False, alias

    def update_row(self, pk: Any, **values: Any) -> int:
        """UPDATE the row with this primary key: the named fields set to these values
        (prepared as ``QuerySet.update`` prepares them; no expressions); the rows
        changed (0 or 1). One statement, made once for each set of names."""
        return self.update_where({self.model._meta.pk.attname: pk}, **values)

    def update_where(self, where: dict[str, Any], **values: Any) -> int:
        """UPDATE the rows whose fields equal ``where``'s values (joined by AND): the
        named fields set to these values (prepared as ``QuerySet.update`` prepares
        them; no expressions); the rows changed. One statement, made once for each set
        of names."""
        names = (*values, "", *where)
        sql = self._updates.get(names)
        if sql is None:
            qn = self.conn.ops.quote_name
            sets = ", ".join(f"{qn(self.field[name].column)} = %s" for name in values)
            match = " AND ".join(f"{qn(self.field[name].column)} = %s" for name in where)
            sql = self._updates[names] = f"UPDATE {self.table} SET {sets} WHERE {match}"
        prep, conn = self.prep, self.conn
        params = [prep(self.field[name], value) for name, value in values.items()]
        params += [self.field[name].get_db_prep_value(value, conn) for name, value in where.items()]
        cursor = self.cursor()
        cursor.execute(sql, params)
        return int(cursor.rowcount)


S = TypeVar("S")
_made: weakref.WeakKeyDictionary[BaseDatabaseWrapper, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()


def made_once(kind: Callable[..., S], *args: Any) -> S:
    """``kind(connection, *args)`` on this thread's connection, made once per connection
    (then looked up): the statements of a model (``table_statements``), or a model's own
    kind of them (``mailbox.statements``)."""
    conn = connections[DEFAULT_DB_ALIAS]
    mine = _made.get(conn)
    if mine is None:
        mine = _made[conn] = {}
    key = (kind, *args)
    try:
        found: S = mine[key]
        return found
    except KeyError:
        made = mine[key] = kind(conn, *args)
        return made


def prepared_cursor() -> Any:
    """This thread's connection's cursor for prepared statements
    (``markus.core.db.make_prepared_cursor``), kept (``KeptCursor``)."""
    return made_once(KeptCursor, make_prepared_cursor).get()


def table_statements(model: type[M]) -> TableStatements[M]:
    """The statements of ``model`` on this thread's connection."""
    return made_once(TableStatements, model)
