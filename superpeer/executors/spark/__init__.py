"""The Spark executor: ``executor`` (driver side), ``feed`` (the durable log Spark reads),
``source`` (the data source whose scan tasks run the batch operators)."""
