"""Reference data of the PatientIntake domain: medications, interactions, allergens, payers.

Synthetic but plausible: the drug names are real, the classes and interaction severities
are a simplified table the SOP declares authoritative. Nothing here is clinical guidance.
Every table is a tuple or a read-only mapping so that no tool can alter it.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["MEDICATIONS", "INTERACTIONS", "ALLERGENS", "MILD_REACTIONS", "SEVERE_REACTIONS", "PAYERS",
           "DISCOUNT_PLAN", "PLAN_NAMES", "PHARMACY_CHAINS", "PHARMACY_STREETS", "FIRST_NAMES", "LAST_NAMES",
           "PATHWAY_PREFIX", "SEVERITIES", "interaction", "normalize_name"]

#: generic name -> (brand names, drug class, high alert)
MEDICATIONS: MappingProxyType = MappingProxyType({
    "warfarin": (("Coumadin", "Jantoven"), "anticoagulant", True),
    "apixaban": (("Eliquis",), "anticoagulant", True),
    "insulin glargine": (("Lantus", "Basaglar"), "insulin", True),
    "oxycodone": (("OxyContin", "Roxicodone"), "opioid", True),
    "morphine": (("MS Contin",), "opioid", True),
    "tramadol": (("Ultram",), "opioid", True),
    "methotrexate": (("Trexall",), "antimetabolite", True),
    "atorvastatin": (("Lipitor",), "statin", False),
    "simvastatin": (("Zocor",), "statin", False),
    "lisinopril": (("Zestril", "Prinivil"), "ace inhibitor", False),
    "losartan": (("Cozaar",), "angiotensin receptor blocker", False),
    "amlodipine": (("Norvasc",), "calcium channel blocker", False),
    "metformin": (("Glucophage",), "biguanide", False),
    "sertraline": (("Zoloft",), "ssri", False),
    "fluoxetine": (("Prozac",), "ssri", False),
    "ibuprofen": (("Advil", "Motrin"), "nsaid", False),
    "naproxen": (("Aleve",), "nsaid", False),
    "aspirin": (("Bayer", "Ecotrin"), "nsaid", False),
    "amoxicillin": (("Amoxil",), "penicillin", False),
    "cephalexin": (("Keflex",), "cephalosporin", False),
    "trimethoprim-sulfamethoxazole": (("Bactrim", "Septra"), "sulfonamide", False),
    "clarithromycin": (("Biaxin",), "macrolide", False),
    "ciprofloxacin": (("Cipro",), "fluoroquinolone", False),
    "tizanidine": (("Zanaflex",), "muscle relaxant", False),
    "sildenafil": (("Viagra", "Revatio"), "pde5 inhibitor", False),
    "isosorbide mononitrate": (("Imdur",), "nitrate", False),
    "levothyroxine": (("Synthroid", "Levoxyl"), "thyroid hormone", False),
    "omeprazole": (("Prilosec",), "proton pump inhibitor", False),
    "spironolactone": (("Aldactone",), "potassium-sparing diuretic", False),
    "hydrochlorothiazide": (("Microzide",), "thiazide diuretic", False),
    "albuterol": (("ProAir", "Ventolin"), "bronchodilator", False),
    "gabapentin": (("Neurontin",), "anticonvulsant", False),
    "prednisone": (("Rayos",), "corticosteroid", False),
    "metoprolol": (("Lopressor", "Toprol-XL"), "beta blocker", False),
    "clopidogrel": (("Plavix",), "antiplatelet", False),
    "cetirizine": (("Zyrtec",), "antihistamine", False),
    "montelukast": (("Singulair",), "leukotriene antagonist", False),
    "escitalopram": (("Lexapro",), "ssri", False),
})

#: Severity names, mildest first.
SEVERITIES = ("minor", "moderate", "major", "contraindicated")

_PAIRS = (
    ("warfarin", "aspirin", "major"), ("warfarin", "ibuprofen", "major"), ("warfarin", "naproxen", "major"),
    ("apixaban", "aspirin", "major"), ("apixaban", "clarithromycin", "moderate"),
    ("oxycodone", "gabapentin", "major"), ("tramadol", "sertraline", "major"), ("tramadol", "fluoxetine", "major"),
    ("tramadol", "escitalopram", "major"), ("methotrexate", "trimethoprim-sulfamethoxazole", "contraindicated"),
    ("insulin glargine", "metoprolol", "moderate"), ("morphine", "gabapentin", "major"),
    ("simvastatin", "clarithromycin", "contraindicated"), ("atorvastatin", "clarithromycin", "major"),
    ("sildenafil", "isosorbide mononitrate", "contraindicated"), ("ciprofloxacin", "tizanidine", "contraindicated"),
    ("spironolactone", "trimethoprim-sulfamethoxazole", "major"),
    ("lisinopril", "spironolactone", "moderate"), ("losartan", "spironolactone", "moderate"),
    ("lisinopril", "losartan", "moderate"),
    ("lisinopril", "ibuprofen", "moderate"), ("losartan", "naproxen", "moderate"),
    ("amlodipine", "simvastatin", "moderate"), ("clopidogrel", "omeprazole", "moderate"),
    ("prednisone", "ibuprofen", "moderate"), ("sertraline", "ibuprofen", "moderate"),
    ("aspirin", "ibuprofen", "moderate"), ("fluoxetine", "metoprolol", "moderate"),
    ("escitalopram", "omeprazole", "moderate"),
    ("metformin", "hydrochlorothiazide", "minor"), ("levothyroxine", "omeprazole", "minor"),
    ("metoprolol", "albuterol", "minor"), ("atorvastatin", "amlodipine", "minor"),
    ("cetirizine", "gabapentin", "minor"),
)
#: frozenset({a, b}) -> severity, for every interacting pair of generic names.
INTERACTIONS: MappingProxyType = MappingProxyType({frozenset((a, b)): s for a, b, s in _PAIRS})

#: canonical substance -> (category, drug class or None, synonyms accepted by lookup_allergen)
ALLERGENS: MappingProxyType = MappingProxyType({
    "penicillin": ("drug", "penicillin", ("penicillins", "pcn")),
    "sulfa drugs": ("drug", "sulfonamide", ("sulfa", "sulfonamides")),
    "codeine": ("drug", "opioid", ()),
    "aspirin": ("drug", "nsaid", ("asa",)),
    "cephalosporins": ("drug", "cephalosporin", ("cephalosporin",)),
    "macrolides": ("drug", "macrolide", ("erythromycin",)),
    "iodinated contrast": ("drug", "contrast agent", ("contrast dye", "iodine contrast")),
    "latex": ("environmental", None, ()),
    "pollen": ("environmental", None, ("hay fever",)),
    "dust mites": ("environmental", None, ()),
    "peanuts": ("food", None, ("peanut",)),
    "shellfish": ("food", None, ()),
    "eggs": ("food", None, ("egg",)),
    "tree nuts": ("food", None, ()),
})

MILD_REACTIONS = ("rash", "itching", "hives", "nausea", "upset stomach", "sneezing", "watery eyes")
SEVERE_REACTIONS = ("anaphylaxis", "angioedema", "difficulty breathing", "throat swelling",
                    "Stevens-Johnson syndrome")

#: payer id -> (payer name, member-id prefix, plan ids with their names)
PAYERS: MappingProxyType = MappingProxyType({
    "NORTHSTAR": ("Northstar Mutual", "NSM", (("NSM-PPO-2", "Northstar PPO Plus"), ("NSM-HMO-1", "Northstar HMO"))),
    "BLUEFIELD": ("Bluefield Health", "BFH", (("BFH-EPO", "Bluefield EPO"), ("BFH-GOLD", "Bluefield Gold PPO"))),
    "CASCADE": ("Cascade Care Alliance", "CCA", (("CCA-SILVER", "Cascade Silver"), ("CCA-BRONZE", "Cascade Bronze"))),
    "MEDISTATE": ("MediState Medicaid", "MSD", (("MSD-MCO", "MediState Managed Care"),)),
})
#: The clinic's discount programme, used for the network check of uninsured patients.
DISCOUNT_PLAN = "RBC-DISCOUNT"
PLAN_NAMES: MappingProxyType = MappingProxyType(
    {**{plan: name for _, _, plans in PAYERS.values() for plan, name in plans},
     DISCOUNT_PLAN: "Riverbend Clinic Discount Programme"})

PHARMACY_CHAINS = ("Oakridge Pharmacy", "CarePlus Drugs", "Main Street Apothecary", "Riverside Rx",
                   "Harbor Health Pharmacy", "Greenleaf Pharmacy", "Summit Drug Co", "Valley Family Pharmacy",
                   "Pioneer Pharmacy", "Lakeside Drugstore")
PHARMACY_STREETS = ("Elm St", "Cedar Ave", "Market St", "2nd Ave", "Harbor Blvd", "Pine Rd", "Mill St",
                    "Lakeview Dr", "Union St", "Grant Ave")
FIRST_NAMES = ("Amara", "Ben", "Carmen", "Dmitri", "Elif", "Farah", "Gustavo", "Hana", "Isaac", "Jolene",
               "Kwame", "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tamsin")
LAST_NAMES = ("Abernathy", "Bianchi", "Castellano", "Dubois", "Eriksen", "Fofana", "Gallagher", "Haddad",
              "Ibrahim", "Jankowski", "Kowalczyk", "Lindqvist", "Moreau", "Nakamura", "Okonkwo", "Pereira")

#: care pathway -> registration-id prefix (the registration system files each pathway in its own queue).
PATHWAY_PREFIX: MappingProxyType = MappingProxyType(
    {"standard": "ST", "pharmacist_review": "PR", "clinical_review": "CR"})


def normalize_name(text: str) -> str:
    """Case-folded text with leading, trailing and repeated whitespace removed.

    >>> normalize_name("  Oakridge   PHARMACY ")
    'oakridge pharmacy'
    """
    return " ".join(str(text).split()).casefold()


def interaction(a: str, b: str) -> str | None:
    """The severity of the interaction between two generic names, or None.

    >>> interaction("aspirin", "warfarin"), interaction("aspirin", "metformin")
    ('major', None)
    """
    return INTERACTIONS.get(frozenset((a, b)))
