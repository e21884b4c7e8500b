"""The demo's reset of the GitOps repository: a directory no namespace row claims (the database was emptied and
the data folder kept) is removed, so the demo's next commit of the same files is a real commit."""
from apps.namespaces.demo import reset
from apps.namespaces.models import ManagedNamespace
from apps.namespaces.services import commit, repository, submit
from tests.namespaces.conftest import request_spec


def test_reset_removes_directories_no_namespace_claims_and_keeps_the_others(world):
    commit(submit(request_spec(), world["alice"]))  # a-llm01-mlflow: committed, claimed by its row
    claimed = ManagedNamespace.objects.get(name="a-llm01-mlflow")
    repo = repository()
    orphan = repo.directory("a-gone01", "a-gone01-chat")
    assert repo.write(orphan, {"namespace.yaml": "kind: Namespace\n"}, "left by an emptied database")
    assert (repo.path / orphan).is_dir()

    reset()

    assert not (repo.path / orphan).exists()
    assert (repo.path / repo.directory("a-llm01", claimed.name)).is_dir()
    # The same files again are a new commit, not "nothing to commit".
    assert repo.write(orphan, {"namespace.yaml": "kind: Namespace\n"}, "the demo again")
