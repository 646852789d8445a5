"""The Spark side: the session (``session``), a batch's one Spark job (``batch``), landing paths
handed to Spark literally (``paths``), Spark DDL checked without Spark (``ddl``), and one row per
merge key kept before a write (``dedupe``)."""
