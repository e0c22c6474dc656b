"""The Spark executor: ``executor`` (the driver's micro-batch loop), ``feed`` (the durable log
Spark's tasks read), ``tasks`` (the scan tasks that run the batch operators), ``jobs`` (one
Spark job per micro-batch), ``batch`` (archive queries in batch mode)."""
