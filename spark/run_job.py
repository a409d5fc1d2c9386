"""The file spark-submit runs (its primary resource must be a .py file): ``spark-submit … run_job.py <cmd>``.

The CronJob runs the driver in client mode inside its own pod, so this process's exit code is the pod's
and the Job's (k8s/spark/cronjob.yaml, docs/spark.md "Kubernetes").
"""

from spark.archive_job.job import main

if __name__ == "__main__":
    raise SystemExit(main())
