"""What run and reduce agree on: the Parquet schemas, the outcome names, the attempt layout,
run.json and the reading conventions. Nothing here imports Spark, asyncio or compiled code, so
the executor's recorder, the coordinator's summary and the Spark reduce can all depend on it.
"""
