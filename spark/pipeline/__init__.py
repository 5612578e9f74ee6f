"""The order pipeline (events.py: the input; jobs.py: the batch and streaming jobs;
__main__.py: `python -m spark.pipeline ...`)."""
