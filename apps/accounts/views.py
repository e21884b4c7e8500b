from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.shortcuts import redirect
from django.views.generic import TemplateView
from rest_framework.authtoken.models import Token


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    pass


class ProfileView(TemplateView):
    """The user's own page: projects, and the API token for scripts."""

    template_name = "accounts/profile.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["projects"] = self.request.user.projects.order_by("slurm_account")
        context["token"] = Token.objects.filter(user=self.request.user).first()
        context["new_token"] = self.request.session.pop("new_token", None)
        return context

    def post(self, request, *args, **kwargs):
        # One token per user: issuing a new one revokes the old, so a leaked key dies with it.
        Token.objects.filter(user=request.user).delete()
        if request.POST.get("action") == "revoke":
            messages.success(request, "Your API token was revoked.")
        else:
            token = Token.objects.create(user=request.user)
            request.session["new_token"] = token.key
            messages.success(request, "A new API token was issued. Copy it now: it is shown only once.")
        return redirect("accounts:profile")
