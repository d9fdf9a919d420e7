"""The lean path's fold gives the task the SDK's ``TaskManager`` gives, event for event."""

from __future__ import annotations

import random

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskManager
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidAgentResponseError, InvalidParamsError
from google.protobuf.struct_pb2 import Struct

from node.server.lean_path import TaskFold

TASK, CONTEXT = "task-1", "context-1"
FIRST = Message(message_id="m0", role=Role.ROLE_USER, parts=[Part(text="hi")])
Event = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


def _metadata(rng: random.Random) -> Struct:
    data = Struct()
    if rng.random() < 0.5:
        data.update({rng.choice("abc"): rng.randint(0, 9)})
    return data


def _events(rng: random.Random, start_with_task: bool) -> list[Event]:
    """A random run of one task's events, as an executor sends them (no invalid appends)."""
    events: list[Event] = []
    if start_with_task:
        events.append(Task(id=TASK, context_id=CONTEXT, history=[FIRST]))
    artifacts: list[str] = []
    for i in range(rng.randint(1, 12)):
        if rng.random() < 0.5:
            status = TaskStatus(state=rng.choice([TaskState.TASK_STATE_WORKING] * 3 + [4, 5]))
            if rng.random() < 0.7:
                status.message.CopyFrom(
                    Message(message_id=f"s{i}", role=Role.ROLE_AGENT, parts=[Part(text=f"{i}")])
                )
            event = TaskStatusUpdateEvent(task_id=TASK, context_id=CONTEXT, status=status)
            event.metadata.CopyFrom(_metadata(rng))
            events.append(event)
        else:
            append = bool(artifacts) and rng.random() < 0.4
            again = bool(artifacts) and rng.random() < 0.2  # not appended: replaced whole
            artifact_id = rng.choice(artifacts) if append or again else f"a{i}"
            artifacts.append(artifact_id)
            artifact = Artifact(artifact_id=artifact_id, name=f"n{i}", parts=[Part(text=f"p{i}")])
            artifact.metadata.CopyFrom(_metadata(rng))
            events.append(
                TaskArtifactUpdateEvent(
                    task_id=TASK, context_id=CONTEXT, artifact=artifact, append=append
                )
            )
    return events


def _copy(event: Event) -> Event:
    twin = type(event)()
    twin.CopyFrom(event)
    return twin


async def _both(events: list[Event]) -> tuple[Task | BaseException, Task | BaseException]:
    manager = TaskManager(InMemoryTaskStore(), ServerCallContext(), TASK, CONTEXT, FIRST)
    fold = TaskFold(TASK, CONTEXT, FIRST)
    ours: Task | BaseException
    theirs: Task | BaseException
    try:
        for event in events:
            await manager.save_task_event(_copy(event))
        found = await manager.get_task()
        assert found is not None
        theirs = found
    except Exception as exc:
        theirs = exc
    try:
        for event in events:
            await fold.enqueue_event(_copy(event))
        ours = fold.folded
    except Exception as exc:
        ours = exc
    return ours, theirs


@pytest.mark.parametrize("seed", range(300))
async def test_the_fold_equals_the_task_managers_over_random_runs(seed: int) -> None:
    rng = random.Random(seed)
    ours, theirs = await _both(_events(rng, start_with_task=seed % 10 != 0))
    if isinstance(theirs, BaseException):
        assert type(ours) is type(theirs) and str(ours) == str(theirs)
    else:
        assert ours == theirs


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (TaskStatusUpdateEvent(task_id="other", context_id=CONTEXT), InvalidParamsError),
        (TaskStatusUpdateEvent(task_id=TASK, context_id="other"), InvalidParamsError),
        (Task(id="other", context_id=CONTEXT), InvalidParamsError),
        (
            TaskArtifactUpdateEvent(
                task_id=TASK, context_id=CONTEXT, artifact=Artifact(artifact_id="x"), append=True
            ),
            InvalidAgentResponseError,
        ),
    ],
)
async def test_a_wrong_event_raises_what_the_task_manager_raises(
    event: Event, error: type[Exception]
) -> None:
    ours, theirs = await _both([Task(id=TASK, context_id=CONTEXT, history=[FIRST]), event])
    assert isinstance(theirs, error)
    assert type(ours) is type(theirs) and str(ours) == str(theirs)
