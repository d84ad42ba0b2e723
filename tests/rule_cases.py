"""One table of filter cases (SPEC S15.3-S15.5), run against the Python evaluator
(tests/unit/test_rule_language.py) and the Spark compilation
(tests/integration/test_rule_columns.py): both must give exactly these matches."""

from __future__ import annotations

from typing import Any

# message name -> (system fields, application properties)
MESSAGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "red": ({"message_id": "m1", "subject": "Red", "correlation_id": "c1", "to": "a"},
            {"Color": "Red", "n": 5, "d": 1.5, "flag": True, "s": "5", "name": "O'Brien",
             "pct": "50%"}),
    "blue": ({"message_id": "m2", "subject": None, "content_type": "text/plain"},
             {"color": "blue", "n": -7, "big": 9223372036854775807, "empty": None}),
    "bare": ({"message_id": "m3"}, {}),
}

# (filter, parameters, the messages it matches)
CASES: list[tuple[str, dict[str, Any] | None, set[str]]] = [
    ("1 = 1", None, {"red", "blue", "bare"}),
    ("color = 'Red'", None, {"red"}),  # names case-insensitive
    ("color = 'red'", None, set()),  # values case-sensitive
    ("user.COLOR <> 'Red'", None, {"blue"}),  # unknown for bare
    ("sys.Label = 'Red'", None, {"red"}),
    ("sys.Subject = 'Red' AND sys.To = 'a'", None, {"red"}),
    ("[color] IN ('Red', 'blue')", None, {"red", "blue"}),
    ("color NOT IN ('Red')", None, {"blue"}),
    ("color IN ('x', NULL)", None, set()),  # unknown, not false, and not a match
    ("NOT (color IN ('x', NULL))", None, set()),
    ("n > 0", None, {"red"}),
    ("n = 5.0", None, {"red"}),  # int and double compare numerically
    ("s = 5", None, set()),  # strings never become numbers
    ("s = '5'", None, {"red"}),
    ("d * 2 = 3", None, {"red"}),
    ("n + 1 = 6 OR n - 1 = -8", None, {"red", "blue"}),
    ("n / 2 = 2", None, {"red"}),  # integer division truncates
    ("n / 2 = -3", None, {"blue"}),  # toward zero
    ("n % 2 = -1", None, {"blue"}),  # the dividend's sign
    ("n / 0 = 1 OR n / 0 IS NULL", None, {"red", "blue", "bare"}),  # unknown, IS NULL true
    ("big + 1 IS NULL", None, {"red", "blue", "bare"}),  # overflow is unknown
    ("big > 1E18", None, {"blue"}),
    ("-n = 7", None, {"blue"}),
    ("+n = 5", None, {"red"}),
    ("n IS NULL", None, {"bare"}),
    ("empty IS NULL AND EXISTS(empty)", None, {"blue"}),  # present but null
    ("EXISTS(color)", None, {"red", "blue"}),
    ("NOT EXISTS(color)", None, {"bare"}),
    ("EXISTS(sys.ContentType)", None, {"blue"}),
    ("color IS NOT NULL", None, {"red", "blue"}),
    ("flag = TRUE", None, {"red"}),
    ("flag", None, {"red"}),
    ("flag > FALSE", None, set()),  # bools only compare for equality
    ("NOT flag", None, set()),
    ("color = 'Red' OR missing = 1", None, {"red"}),  # TRUE OR unknown
    ("color = 'Red' AND missing = 1", None, set()),
    ("NOT (color = 'Red' AND missing = 1)", None, {"blue"}),  # NOT unknown is unknown
    ("NOT (color = 'blue' AND missing = 1)", None, {"red"}),  # NOT (FALSE AND unknown)
    ("color LIKE 'R%'", None, {"red"}),
    ("color LIKE '_lue'", None, {"blue"}),
    ("color NOT LIKE 'R%'", None, {"blue"}),
    ("pct LIKE '50!%' ESCAPE '!'", None, {"red"}),
    ("pct LIKE '5!_%' ESCAPE '!'", None, set()),
    ("name = 'O''Brien'", None, {"red"}),
    ("n LIKE '5'", None, set()),  # LIKE on a number is unknown
    ("color = @c AND n >= @low", {"c": "Red", "low": 5}, {"red"}),
    ('"color" = \'blue\'', None, {"blue"}),
    ("property('color') = 'blue' OR p('n') = 5", None, {"red", "blue"}),
    ("sys.MessageId IN ('m1', 'm3')", None, {"red", "bare"}),
    ("newid() IS NOT NULL AND newid() <> newid()", None, {"red", "blue", "bare"}),
    ("color + '!' = 'Red!'", None, {"red"}),
    ("(n + 3) * 2 % 5 = 1", None, {"red"}),
    ("d > n", None, set()),
    ("1.5E0 = d", None, {"red"}),
]

# (action, the properties and system fields of its copy of "red")
ACTIONS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("SET color = 'Green'", {"Color": "Green"}, {}),
    ("SET n = n * 10; SET m = n + 1", {"n": 50, "m": 51}, {}),
    ("REMOVE color; REMOVE flag", {"Color": None, "flag": None}, {}),
    ("SET sys.Label = 'relabeled'; SET x = sys.Label", {"x": "relabeled"},
     {"subject": "relabeled"}),
    ("SET ok = n > 1 AND flag", {"ok": True}, {}),
    ("SET ratio = d / 3", {"ratio": 0.5}, {}),
    ("SET sys.Label = d * 1E20; SET sys.To = 1E-5", {}, {"subject": "1.5E20", "to": "1.0E-5"}),
]
