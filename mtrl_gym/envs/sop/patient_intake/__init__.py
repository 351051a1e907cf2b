"""``mtrl/SOP-PatientIntake-v0``: register a new patient by following a clinic's intake SOP.

The agent reads a pre-visit intake form, verifies insurance with the payer (coverage
dates against the appointment date), checks the preferred pharmacy in the directory and
against the right plan's network, rates medication risk (high-alert drugs, interaction
severities, polypharmacy) and allergy risk (reaction severity, drug-class conflicts),
assigns a care pathway, registers the patient once (a stateful action whose id the answer
must carry), and submits seven fields. The SOP is ``sop.md`` next to this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mtrl_gym.envs.sop.base import RecordCheck, SOPDomain, SOPEnv
from mtrl_gym.envs.sop.grading import Field
from mtrl_gym.envs.sop.patient_intake import procedure, tools, world
from mtrl_gym.envs.sop.patient_intake.catalog import MEDICATIONS

__all__ = ["PatientIntake", "PatientIntakeEnv", "OUTPUT_SCHEMA"]

_HIGH_ALERT = tuple(sorted(g for g, (_, _, ha) in MEDICATIONS.items() if ha))
_REGISTRATION_FIELDS = ("insurance_status", "pharmacy_status", "medication_risk", "allergy_risk", "care_pathway")

#: The final answer's fields (SOP Step 8).
OUTPUT_SCHEMA: dict[str, Field] = {
    "registration_id": Field("str", description="The id register_patient returned"),
    "insurance_status": Field("enum", values=("verified", "inactive", "not_found", "self_pay")),
    "pharmacy_status": Field("enum", values=("in_network", "out_of_network", "invalid", "not_provided")),
    "medication_risk": Field("enum", values=("low", "moderate", "high")),
    "allergy_risk": Field("enum", values=("none", "low", "high")),
    "flagged_medications": Field("list", item_type="enum", values=_HIGH_ALERT,
                                 description="Generic names of the patient's high-alert medications, any order"),
    "care_pathway": Field("enum", values=("standard", "pharmacist_review", "clinical_review")),
}


class PatientIntake(SOPDomain, world=world, procedure=procedure, tools=tools):
    """The PatientIntake domain: SOP PA-104 of a (synthetic) community clinic."""

    output_schema = OUTPUT_SCHEMA
    record_check = RecordCheck("registration_id", "registrations", fields=_REGISTRATION_FIELDS, what="registration")

    def task_inputs(self, world: Mapping[str, Any]) -> dict[str, Any]:
        return {"intake_id": world["intake_id"]}


class PatientIntakeEnv(SOPEnv):
    """Complete a new patient's intake by following a clinic SOP with ten tools.

    ## Description
    The system prompt holds SOP PA-104 (``sop.md``): verify insurance (member-id
    normalisation, coverage dates vs. the appointment date, stale ``status`` text is
    ignored), check the preferred pharmacy (exact name and ZIP match among look-alikes,
    open status, the network of the verified plan or of the clinic's discount programme),
    rate medication risk (high-alert drugs, interaction severity, five or more drugs) and
    allergy risk (reaction severity table, blank reactions, drug-class conflicts), assign a
    care pathway, and register the patient once. The first observation holds only the
    intake id.

    ## Observation Space, Invalid Actions
    As :class:`~mtrl_gym.envs.sop.SOPEnv`. Tools: ``get_intake_form``,
    ``verify_eligibility``, ``search_pharmacies``, ``check_pharmacy_network``,
    ``lookup_medication``, ``check_interactions``, ``lookup_allergen``, ``register_patient``
    (stateful; refuses a second registration of the same intake) and two distractors,
    ``get_appointment_slots`` and ``send_portal_message`` (hidden with
    ``difficulty={"distractors": False}``).

    ## Starting State
    A world drawn from a seed (:func:`~.world.generate_world`): one intake form, the
    payer's member record, a pharmacy directory with look-alikes, plan networks. Outcomes
    are balanced by design (the care pathway is uniform over its three values).

    ## Rewards
    1.0 when all seven fields are right, no extra keys are present and the registration
    was made with the expected values; else 0.0. ``FieldReward`` gives the per-field mean.

    ## Arguments
    ``gymnasium.make("mtrl/SOP-PatientIntake-v0", difficulty={"noise": 2, "max_medications": 8})``.
    Knobs: ``noise`` (0, 1, 2; default 1), ``distractors`` (default true),
    ``max_medications`` (2-10; default 6). Other arguments as :class:`~mtrl_gym.envs.sop.SOPEnv`.
    """

    domain = PatientIntake()
