"""The Spark side: the session (``session``), a batch's one Spark job (``batch``), landing paths
handed to Spark literally (``paths``), and Spark DDL checked without Spark (``ddl``)."""
