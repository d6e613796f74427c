import os

from django.core.wsgi import get_wsgi_application

from markus import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "markus.settings")
telemetry.setup()  # OTEL_* asks for traces: before Django builds its middleware chain
application = get_wsgi_application()
