"""Demo part: people and projects.

Two users can log in (``demo``, a researcher, and ``staff``); the other researchers exist so that
job lists, account sharing and staff views have realistic populations. Their passwords are
unusable. Project names follow the centre's convention of short Slurm account codes.
"""
from dataclasses import dataclass

from django.contrib.auth import get_user_model

from apps.core.demo import DemoContext, demo_part

from .models import Membership, MembershipRoleChoices, Project


@dataclass(frozen=True)
class DemoLogin:
    role: str
    username: str
    password: str


DEMO_LOGINS = (
    DemoLogin("researcher", "demo", "belvedere-demo"),
    DemoLogin("staff", "staff", "belvedere-staff"),
)
DEMO_EMAIL_DOMAIN = "demo.belvedere.invalid"

PROJECT_THEMES = [
    ("llm", "Large language model pretraining"),
    ("moe", "Mixture-of-experts scaling study"),
    ("clim", "Km-scale climate emulator"),
    ("wx", "Weather foundation model"),
    ("mat", "Materials property prediction"),
    ("bio", "Protein structure models"),
    ("med", "Medical imaging foundation model"),
    ("vis", "Vision-language models"),
    ("rl", "Reinforcement learning from feedback"),
    ("astro", "Radio astronomy surrogates"),
    ("cfd", "Neural operators for fluid dynamics"),
    ("eval", "Model evaluation and safety"),
]
GIVEN = ["Anna", "Luca", "Mei", "Jonas", "Sara", "Tomas", "Ines", "Ravi", "Elena", "Noah", "Chiara", "Yuki",
         "Marco", "Lea", "Omar", "Nina", "Felix", "Aiko", "David", "Sofia", "Pablo", "Hanna", "Ivan", "Zoe"]
FAMILY = ["Keller", "Rossi", "Chen", "Weber", "Moretti", "Novak", "Silva", "Iyer", "Popescu", "Meier", "Bianchi",
          "Tanaka", "Favre", "Huber", "Haddad", "Kowalski", "Schmid", "Sato", "Levy", "Garcia", "Martin", "Berg"]
RESEARCHER_COUNT = 36


def reset() -> None:
    Project.objects.filter(description__startswith="[demo]").delete()
    get_user_model().objects.filter(email__endswith="@" + DEMO_EMAIL_DOMAIN).delete()


@demo_part("accounts", order=10, reset=reset)
def build(context: DemoContext) -> dict:
    rng = context.rng
    User = get_user_model()
    projects = []
    for index, (code, title) in enumerate(PROJECT_THEMES):
        account = f"a-{code}{index + 1:02d}"
        projects.append(Project(slurm_account=account, title=title, description=f"[demo] {title} ({account})"))
    Project.objects.bulk_create(projects)
    projects = list(Project.objects.filter(description__startswith="[demo]").order_by("slurm_account"))

    names = set()
    researchers = []
    while len(researchers) < RESEARCHER_COUNT:
        first, last = rng.choice(GIVEN), rng.choice(FAMILY)
        username = f"{first[0]}{last}".lower()
        if username in names or username in {login.username for login in DEMO_LOGINS}:
            continue
        names.add(username)
        user = User(username=username, first_name=first, last_name=last, email=f"{username}@{DEMO_EMAIL_DOMAIN}")
        user.set_unusable_password()
        researchers.append(user)
    logins = []
    for login in DEMO_LOGINS:
        user = User(username=login.username, email=f"{login.username}@{DEMO_EMAIL_DOMAIN}", is_staff=login.role == "staff")
        user.first_name, user.last_name = ("Dana", "Demo") if login.role == "researcher" else ("Sam", "Staff")
        user.set_password(login.password)
        logins.append(user)
    User.objects.bulk_create(researchers + logins)
    by_name = {user.username: user for user in User.objects.filter(email__endswith="@" + DEMO_EMAIL_DOMAIN)}

    memberships = []
    for user in researchers:
        for project in rng.sample(projects, k=rng.choice([1, 1, 2, 3])):
            memberships.append(Membership(user=by_name[user.username], project=project))
    for project in projects:
        manager = rng.choice(researchers)
        memberships = [m for m in memberships if not (m.user.username == manager.username and m.project == project)]
        memberships.append(Membership(user=by_name[manager.username], project=project, role=MembershipRoleChoices.ROLE_MANAGER))
    # The demo researcher shares two projects with others, so account-level sharing shows up.
    for project in projects[:2]:
        memberships.append(Membership(user=by_name["demo"], project=project))
    Membership.objects.bulk_create(memberships)
    context.shared["projects"] = [project.slurm_account for project in projects]
    accounts_of: dict[str, set[str]] = {}
    for membership in memberships:
        accounts_of.setdefault(membership.user.username, set()).add(membership.project.slurm_account)
    context.shared["memberships"] = accounts_of
    context.shared["users"] = sorted(by_name)
    return {"projects": len(projects), "users": len(by_name), "memberships": len(memberships)}
