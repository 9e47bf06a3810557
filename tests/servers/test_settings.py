"""run_pipeline takes RunConfig's settings as RunConfig declares them: a model reads, for each, the
model's type, bounds, default and description, under the tool's name for it; nothing restated."""

import asyncio

from fastmcp import Client

from apex_core.pipeline.config import RunConfig
from servers._settings import settings_of
from servers.pipeline import PIPELINE_SETTINGS, TOOL_NAMES, mcp

_KEYS = ("type", "items", "enum", "minimum", "maximum", "exclusiveMinimum", "minItems", "maxItems", "minLength",
         "maxLength", "anyOf", "default")


def _tool_schema() -> dict:
    async def read() -> dict:
        async with Client(mcp) as client:
            return next(t for t in await client.list_tools() if t.name == "run_pipeline").input_schema

    return asyncio.run(read())


def test_each_setting_of_run_pipeline_is_the_models_field():
    tool = _tool_schema()
    model = RunConfig.model_json_schema(mode="serialization")["properties"]
    for name in PIPELINE_SETTINGS:
        mine, theirs = tool["properties"][TOOL_NAMES.get(name, name)], model[name]
        assert {k: mine.get(k) for k in _KEYS} == {k: theirs.get(k) for k in _KEYS}, name
        described = RunConfig.model_fields[name].description
        assert mine["description"] == described[0].upper() + described[1:] + ".", name
    assert tool["required"] == ["workload"] and "resume_run" in tool["properties"]


def test_a_renamed_parameter_goes_back_to_its_field():
    settings = settings_of(RunConfig, {"workload": "cpu-mini", "kernel_stacks": ["liger"], "top_k": 2}, rename=TOOL_NAMES)
    assert RunConfig(**settings).kernels == ("liger",)


def test_a_bad_setting_is_an_error_result_naming_it():
    async def call():
        async with Client(mcp) as client:
            return await client.call_tool("run_pipeline", {"workload": "cpu-mini", "languages": ["cobol"]}, raise_on_error=False)

    result = asyncio.run(call())
    assert result.is_error and "languages" in result.content[0].text and "cobol" in result.content[0].text
