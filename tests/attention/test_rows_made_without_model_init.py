"""The loop's hot statements (``markus.core.statements``) turn a row into a model
instance as ``Model.from_db`` does, but without the model's ``__init__`` (which walks
every field and was most of a read's time), and prepare a plain string, number or
None without the field's ``get_db_prep_save`` chain: the instance and the stored
values are the ones the ORM makes. A model with an init signal receiver still goes
through ``from_db``, so the receiver runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection, models
from django.db.models.base import ModelState
from django.db.models.signals import post_init

from attention.models import AgentActivity, AgentActivityLog, AgentDecision, LLMSession
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage, WorkingMemory
from markus.core.statements import table_statements

pytestmark = [pytest.mark.pg, pytest.mark.django_db]


def enqueue(agent_id: str, n: int) -> list[MailboxItem]:
    return [
        mailbox_enqueue(
            agent_id=agent_id,
            source_type=T.SYSTEM_EVENT,
            payload={"summary": f"item {i}", "content": f"content {i}", "extra": {"n": i}},
            metadata={"senderId": "u1"},
        )
        for i in range(n)
    ]


def raw_rows(sql) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.columns} FROM {sql.table} ORDER BY {connection.ops.quote_name('id')}")
        return cursor.fetchall()


def counted_inits(monkeypatch) -> list[type]:
    made: list[type] = []
    original = models.Model.__init__

    def spy(self, *args, **kwargs):
        made.append(type(self))
        original(self, *args, **kwargs)

    monkeypatch.setattr(models.Model, "__init__", spy)
    return made


def unwrapped(value):
    return getattr(value, "obj", value)


def fields_of(obj: models.Model) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_a_row_becomes_the_instance_the_orm_reads_without_the_models_init(agent, monkeypatch):
    enqueue(agent.id, 3)
    sql = table_statements(MailboxItem)
    rows = raw_rows(sql)
    by_orm = {i.id: i for i in MailboxItem.objects.all()}
    made = counted_inits(monkeypatch)
    items = [sql.item(row) for row in rows]
    assert made == []  # no __init__: the fields are set as from_db sets them
    assert len(items) == 3
    for item in items:
        assert type(item) is MailboxItem and isinstance(item._state, ModelState)
        assert item._state.adding is False and item._state.db == connection.alias
        assert fields_of(item) == fields_of(by_orm[item.id])
        assert item.summary.startswith("item ") and item.extra["n"] in (0, 1, 2) and item.agent_id == agent.id
        assert item == by_orm[item.id] and item.agent.id == agent.id  # a relation still loads


def test_a_model_with_an_init_receiver_is_still_made_through_from_db(agent, monkeypatch):
    enqueue(agent.id, 2)
    sql = table_statements(MailboxItem)
    rows = raw_rows(sql)
    heard: list[str] = []

    def receiver(sender, instance, **kwargs):
        heard.append(instance.id)

    post_init.connect(receiver, sender=MailboxItem)
    try:
        items = [sql.item(row) for row in rows]
    finally:
        post_init.disconnect(receiver, sender=MailboxItem)
    assert heard == [i.id for i in items] and len(heard) == 2
    assert all(i._state.adding is False for i in items)


@pytest.mark.parametrize(
    "model", [MailboxItem, AgentDecision, AgentActivity, AgentActivityLog, ChatMessage, LLMSession, WorkingMemory]
)
def test_values_are_stored_as_the_fields_prepare_them(model):
    # Every value of the kinds the loop writes, through ``prep``, is what the field's
    # own ``get_db_prep_save`` makes of it: as is where the field keeps it as is.
    sql = table_statements(model)
    samples = [
        "",
        "text ✓",
        0,
        7,
        -3,
        True,
        False,
        None,
        1.5,
        {"a": [1, None]},
        [1, "x"],
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
    ]
    checked = 0
    for f in sql.fields:
        for value in samples:
            if isinstance(value, datetime) and not isinstance(f, models.DateTimeField):
                continue  # ``prep`` stamps a datetime as the datetime field it goes to
            try:
                expected = f.get_db_prep_save(value, connection)
            except Exception:
                continue  # a value this field does not take
            got = sql.prep(f, value)
            if isinstance(value, datetime):
                assert str(got) == str(expected), (f, value)
                continue
            # (PostgreSQL's JSON adapter compares by identity: compare what it wraps.)
            assert type(got) is type(expected) and unwrapped(got) == unwrapped(expected), (model, f.name, value)
            checked += 1
    assert checked


def test_a_string_of_a_text_field_skips_the_fields_preparation(monkeypatch):
    # The point of the shortcut: a plain value of a plain field is not sent through
    # the field's preparation (four calls deep per value, per row written).
    sql = table_statements(AgentActivityLog)
    text = next(f for f in sql.fields if type(f) in (models.CharField, models.TextField))
    number = next(f for f in sql.fields if type(f) is models.IntegerField or type(f) is models.PositiveIntegerField)
    calls: list[str] = []
    for f in (text, number):
        original = f.get_db_prep_save
        monkeypatch.setattr(f, "get_db_prep_save", lambda v, c, _o=original, _n=f.name: calls.append(_n) or _o(v, c))
    assert sql.prep(text, "plain") == "plain" and sql.prep(text, None) is None
    assert calls == []
    # An integer as is too, except where the backend wraps it (psycopg 3's Int4).
    assert unwrapped(sql.prep(number, 3)) == 3
    assert calls == ([] if connection.vendor == "sqlite" else [number.name])
    calls.clear()
    assert unwrapped(sql.prep(number, "4")) == 4 and calls == [number.name]  # anything else: the field's own way


def test_a_new_row_is_the_instance_the_models_init_makes_without_it(agent, monkeypatch):
    item = enqueue(agent.id, 1)[0]
    values = {"agent_id": agent.id, "mailbox_item": item, "type": "system_event", "label": "x: y", "lease_epoch": 3}
    by_init = AgentActivity(**values)
    made = counted_inits(monkeypatch)
    new = table_statements(AgentActivity).new(**values)
    assert made == []
    assert type(new) is AgentActivity and new._state.adding is True and new._state.db == by_init._state.db
    mine, theirs = fields_of(new), fields_of(by_init)
    assert mine.pop("id") and theirs.pop("id")  # each its own default id
    for name in [n for n, v in theirs.items() if isinstance(v, datetime)]:  # each its own time
        assert isinstance(mine.pop(name), datetime) and theirs.pop(name)
    assert mine == theirs
    assert new.mailbox_item is item and new.mailbox_item_id == item.id  # the relation cached, as __init__ does
    # Written and read back as the ORM writes it.
    table_statements(AgentActivity).save_new([new])
    stored = AgentActivity.objects.get(id=new.id)
    assert fields_of(stored) == fields_of(new) and new._state.adding is False


def test_a_new_row_with_a_name_that_is_no_field_goes_through_the_models_init(agent, monkeypatch):
    made = counted_inits(monkeypatch)
    with pytest.raises(TypeError):
        table_statements(AgentActivity).new(agent_id=agent.id, not_a_field=1)
    assert made == [AgentActivity]
