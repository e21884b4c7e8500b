"""Signing in through the real login form, as a person does."""


def log_in(page, base_url: str, username: str, password: str, next_path: str = "/") -> None:
    page.goto(f"{base_url}/accounts/login/?next={next_path}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
