"""OpenAPI description of the job token credential (loaded by JobsConfig.ready)."""
from drf_spectacular.extensions import OpenApiAuthenticationExtension


class JobTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.core.api.authentication.JobTokenAuthentication"
    name = "jobTokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`JobToken bvj_...`: a token scoped to one job, for code running inside it.",
        }
