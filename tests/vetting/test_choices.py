"""The vetting models' choices and the plain modules that reason about the same values hold the same values:
a state, outcome or action added to one and not the other would be refused by the database's choices or
never reached by the rules."""
from apps.vetting import choices, node_states, records, rules


def test_model_choices_are_the_values_the_plain_modules_use():
    assert tuple(choices.VettingResultKindChoices.values) == records.KINDS
    assert tuple(choices.VettingResultOutcomeChoices.values) == records.OUTCOMES
    assert set(records.BAD_OUTCOMES) <= set(choices.VettingResultOutcomeChoices.values)
    assert tuple(choices.RuleActionChoices.values) == rules.ACTIONS
    assert tuple(choices.RuleSeverityChoices.values) == rules.SEVERITIES
    assert tuple(choices.RuleKindChoices.values) == tuple(rules.KIND_PARAMS)
    assert tuple(choices.NodeHealthStateChoices.values) == node_states.STATES
    assert tuple(choices.NodeHealthActionChoices.values) == tuple(node_states.STAFF_ACTIONS)
    assert set(node_states.RULE_ACTIONS) == set(choices.RuleActionChoices.values)


def test_state_labels_are_the_words_the_pages_use():
    assert dict(choices.NodeHealthStateChoices.choices) == node_states.STATE_WORDS
