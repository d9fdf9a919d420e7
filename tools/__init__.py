"""Built-in tools of a2a-node: each module defines module-level tools with ``@tool``.

The loader scans this package and registers every :class:`node.tooling.Tool` it finds:

- ``web``: ``http_fetch``, ``extract_links``, ``html_links`` (through the context's URL guard)
- ``files``: ``read_file``, ``write_file``, ``list_dir``, ``grep`` (inside the context's workspace)
- ``calculator``: ``calculate``, ``number_stats``
- ``json_query``: ``json_query`` (JMESPath)
- ``text``: ``text_stats``, ``keywords``, ``summarize``
"""
