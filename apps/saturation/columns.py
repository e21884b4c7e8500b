"""The saturation score and flags as a column of the job list (apps.core.job_columns), sortable by score."""
from apps.core.job_columns import JobColumn, register_job_column

from .selectors import saturation_by_job


def register() -> None:
    register_job_column(JobColumn(key="saturation", title="Saturation", load=saturation_by_job,
                                  template="saturation/_job_list_cell.html", order_by="saturation__score", order=10,
                                  help="Saturation score 0-100 and flags", css="num saturation-cell"))
