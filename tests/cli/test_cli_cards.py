"""``a2a-node card`` and ``tools``: checking a card, reading a node's card, listing tools."""

from __future__ import annotations

import asyncio
import json
import os

from node.card import load_card
from node.server.app import build_node_app
from tests.cli.clisupport import CARDS, CLI, DATA_CARD, cli


async def test_card_check_names_unknown_tools_with_a_suggestion(tmp_path):
    card = tmp_path / "mine.yaml"
    card.write_text(
        "id: mine\nname: Mine\ndescription: d\ntools: [calculat, json_query, greet]\n",
        encoding="utf-8",
    )
    code, out, err = await cli("card", str(card), "--check")
    assert (code, out) == (2, "")
    assert "unknown tool 'calculat' (did you mean 'calculate'?)" in err
    assert "unknown tool 'greet'" in err and "json_query" not in err
    assert len(err.strip().splitlines()) == 1
    code, out, _ = await cli("card", DATA_CARD, "--check")
    assert code == 0 and "ok (data)" in out


async def test_card_of_a_running_node_prints_whole_numbers_as_ints(serve, tmp_path):
    card = load_card(DATA_CARD)
    url = await serve(
        lambda u: build_node_app(card, public_url=u, data_dir=tmp_path, store="memory")
    )
    code, out, err = await cli("card", url)
    assert code == 0, err
    assert '"maxLength": 1000' in out and "1000.0" not in out
    code, again, _ = await cli("card", f"{url}/.well-known/agent-card.json")
    assert code == 0 and json.loads(again) == json.loads(out)


async def test_card_piped_into_a_reader_that_left_ends_quietly(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # `a2a-node card … | head`, once head has read enough and left
    proc = await asyncio.create_subprocess_exec(
        *CLI,
        "card",
        DATA_CARD,
        "--data-dir",
        str(tmp_path),
        stdout=write_end,
        stderr=asyncio.subprocess.PIPE,
    )
    os.close(write_end)
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert b"BrokenPipeError" not in err and b"Traceback" not in err, err.decode()
    assert proc.returncode == 1


async def test_tools_shows_whole_first_sentences_and_json(tmp_path):
    text_card = str(CARDS / "text.yaml")
    code, out, _ = await cli("tools", text_card, "--data-dir", str(tmp_path))
    assert code == 0
    flat = " ".join(out.split())
    assert "(lowercase, stop words left out), most frequent first." in flat
    code, out, _ = await cli("tools", DATA_CARD, "--data-dir", str(tmp_path), "--json")
    tools = {t["name"]: t for t in json.loads(out)}
    assert set(tools) == {"calculate", "json_query", "number_stats"}
    assert tools["calculate"]["parameters"]["properties"]["expression"]["maxLength"] == 1000
    assert tools["calculate"]["read_only"] is True
