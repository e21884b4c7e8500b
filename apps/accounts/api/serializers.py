from django.contrib.auth import get_user_model
from rest_framework import serializers

from ..models import Membership, Project


class ProjectSerializer(serializers.ModelSerializer):
    class Meta:
        model = Project
        fields = ["id", "slurm_account", "title", "description"]


class MembershipSerializer(serializers.ModelSerializer):
    slurm_account = serializers.CharField(source="project.slurm_account", read_only=True)
    title = serializers.CharField(source="project.title", read_only=True)

    class Meta:
        model = Membership
        fields = ["slurm_account", "title", "role"]


class MeSerializer(serializers.ModelSerializer):
    projects = MembershipSerializer(source="memberships", many=True, read_only=True)

    class Meta:
        model = get_user_model()
        fields = ["username", "email", "first_name", "last_name", "is_staff", "projects"]
