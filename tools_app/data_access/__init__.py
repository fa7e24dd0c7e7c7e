"""The data-access layer: what runs on a table's JSON (SPEC §3), knowing nothing of tools' types, the
registry or any surface.

- pointer.py: RFC 6901 mounts; operations.py: one function per data operation, pure functions of JSON;
- query.py and jmespath_compiler.py: JMESPath, compiled once per expression;
- arguments.py: arguments against a tool's input schema (Draft 2020-12), naming the failing path;
- shape.py: a document's shape without its values (get_data_schema).

Which operation a tool runs is its type's (tools_app.tool_types); the one entry point is
tools_app.execution.executors.execute, called by the call pipeline. Failures are ToolErrors
(tools_app.kernel.errors).
"""
