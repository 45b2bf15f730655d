"""What a run's tasks come to: scores, metrics and their statistics, the summary, Parquet, analysis and
regressions."""
