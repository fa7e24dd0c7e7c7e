"""English date formats, as toolhub's own templates write them ("2026-11-27 09:17:43", UTC): Django's defaults
("Nov. 27, 2026, 9:17 a.m.") put two formats on one page, e.g. the call log's list beside its statistics."""

DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i:s"
TIME_FORMAT = "H:i:s"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
