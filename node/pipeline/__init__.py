"""Pipeline skills: a card declares steps over local or peer tools; each pipeline is one tool.

See :mod:`node.pipeline.spec` for the YAML shape, :mod:`node.pipeline.refs` for references and
:mod:`node.pipeline.tool` for how steps run.
"""

from __future__ import annotations

from node.pipeline.spec import PipelineSpec, StepSpec
from node.pipeline.tool import PipelineTool, pipeline_tool

__all__ = ["PipelineSpec", "PipelineTool", "StepSpec", "pipeline_tool"]
