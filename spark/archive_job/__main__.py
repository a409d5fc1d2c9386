"""``python -m spark.archive_job <command>`` (make spark-expire / spark-repartition / spark-report)."""

from spark.archive_job.job import main

raise SystemExit(main())
