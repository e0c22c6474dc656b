"""Where a subscription's results go when they are not printed: files, webhooks, VOEvent brokers.

Every sink follows ``base.ResultSink``; ``runner.deliver_results`` drives one from the
subscription's saved offset, so a sink that is stopped and started again goes on without a gap or
a duplicate.
"""
